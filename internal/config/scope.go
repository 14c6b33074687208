package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Scope holds the settings an organization (a GitLab group, a Forgejo owner) or a project may
// set for itself in Config.Scopes; a nil or empty field inherits the next wider scope, then
// the global value. Keys are the global settings' own names.
type Scope struct {
	// BranchPrefix overrides lifecycle.branch_prefix.
	BranchPrefix *string `yaml:"branch_prefix,omitempty"`
	// QuestionDeadline overrides lifecycle.question_deadline.
	QuestionDeadline *time.Duration `yaml:"question_deadline,omitempty"`
	// CIFixAttempts overrides lifecycle.ci_fix_attempts (0 disables ci_fix runs).
	CIFixAttempts *int `yaml:"ci_fix_attempts,omitempty"`
	// Phases overrides phase bindings one phase at a time (the other phases keep theirs).
	Phases Phases `yaml:"phases,omitempty"`
	// BudgetUSD overrides lifecycle.budget_usd; 0 removes the budget.
	BudgetUSD *float64 `yaml:"budget_usd,omitempty"`
	// AgentSessionResume overrides sessions.agent_session_resume.
	AgentSessionResume *bool `yaml:"agent_session_resume,omitempty"`
	// RetentionDays overrides retention_days; 0 keeps everything.
	RetentionDays *int `yaml:"retention_days,omitempty"`
	// AutoMerge overrides lifecycle.auto_merge.
	AutoMerge *bool `yaml:"auto_merge,omitempty"`
	// MergeMethod overrides lifecycle.merge_method.
	MergeMethod *string `yaml:"merge_method,omitempty"`
	// Shadow overrides lifecycle.shadow.
	Shadow *bool `yaml:"shadow,omitempty"`
	// SelfReview overrides self_review.enabled.
	SelfReview *bool `yaml:"self_review,omitempty"`
}

// Effective is the settings in force for one project, and where each came from.
type Effective struct {
	Project          string
	BranchPrefix     string
	QuestionDeadline time.Duration
	CIFixAttempts    int
	// Phases binds every phase (and "default") to an agent.
	Phases Phases
	// BudgetUSD is nil when the project has no budget.
	BudgetUSD     *float64
	SessionResume bool
	// RetentionDays is 0 when nothing is purged.
	RetentionDays int
	// AutoMerge is on when Alfred merges the project's merge requests once green, approved and
	// without open thread; MergeMethod how ("merge", "squash", "rebase").
	AutoMerge   bool
	MergeMethod string
	// Shadow is on when Alfred writes nothing to the project's forge and shows on the pages
	// what it would have written.
	Shadow bool
	// SelfReview is on when the bot reads its own merge requests before a human does.
	SelfReview bool
	// Sources maps each key of Keys (and "phases.<phase>") to where its value came from:
	// "default", "global", "org <path>" or "project <path>".
	Sources map[string]string
}

// defaultMergeMethod is the merge method of "" (forge.ParseMergeMethod).
const defaultMergeMethod = string(forge.MergeCommit)

// Scoped setting keys, in the order config check prints them.
var ScopedKeys = []string{"branch_prefix", "question_deadline", "ci_fix_attempts", "budget_usd",
	"agent_session_resume", "retention_days", "auto_merge", "merge_method", "shadow", "self_review"}

// For returns the settings in force for project ("owner/name", a GitLab path "group/sub/name";
// "" for the global values): the project's scope, else the closest enclosing organization's,
// else the global value. A global value equal to the built-in default is reported as
// "default".
func (c *Config) For(project string) Effective {
	def := Default()
	e := Effective{Project: project, BranchPrefix: c.Lifecycle.BranchPrefix, QuestionDeadline: c.Lifecycle.QuestionDeadline,
		CIFixAttempts: c.Lifecycle.CIFixAttempts, BudgetUSD: positive(c.Lifecycle.BudgetUSD),
		SessionResume: c.Sessions.AgentSessionResume == nil || *c.Sessions.AgentSessionResume,
		RetentionDays: c.RetentionDays, AutoMerge: c.Lifecycle.AutoMerge, MergeMethod: cmp.Or(c.Lifecycle.MergeMethod, defaultMergeMethod),
		Shadow: c.Lifecycle.Shadow, SelfReview: c.SelfReview.Enabled,
		Phases: Phases{}, Sources: map[string]string{}}
	global := func(key string, isDefault bool) {
		e.Sources[key] = "global"
		if isDefault {
			e.Sources[key] = "default"
		}
	}
	global("branch_prefix", e.BranchPrefix == def.Lifecycle.BranchPrefix)
	global("question_deadline", e.QuestionDeadline == def.Lifecycle.QuestionDeadline)
	global("ci_fix_attempts", e.CIFixAttempts == def.Lifecycle.CIFixAttempts)
	global("budget_usd", e.BudgetUSD == nil)
	global("agent_session_resume", c.Sessions.AgentSessionResume == nil)
	global("retention_days", e.RetentionDays == 0)
	global("auto_merge", !e.AutoMerge)
	global("merge_method", e.MergeMethod == defaultMergeMethod)
	global("shadow", !e.Shadow)
	global("self_review", !e.SelfReview)
	for _, p := range knownPhases {
		if a := c.Phases[p]; a != "" {
			e.Phases[p] = a
			e.Sources["phases."+p] = "global"
		}
	}
	// Widest scope first, so that narrower ones overwrite.
	for _, s := range slices.Backward(scopeChain(project)) {
		// The source names the entry as configured.
		src := func(name string) string {
			if s == strings.Trim(project, "/") {
				return "project " + name
			}
			return "org " + name
		}
		if v, name, ok := lookupFold(c.Sessions.Overrides, s); ok {
			e.SessionResume, e.Sources["agent_session_resume"] = v, src(name)
		}
		sc, name, ok := lookupFold(c.Scopes, s)
		if !ok {
			continue
		}
		e.apply(sc, src(name))
	}
	return e
}

func (e *Effective) apply(sc Scope, src string) {
	if sc.BranchPrefix != nil {
		e.BranchPrefix, e.Sources["branch_prefix"] = *sc.BranchPrefix, src
	}
	if sc.QuestionDeadline != nil {
		e.QuestionDeadline, e.Sources["question_deadline"] = *sc.QuestionDeadline, src
	}
	if sc.CIFixAttempts != nil {
		e.CIFixAttempts, e.Sources["ci_fix_attempts"] = *sc.CIFixAttempts, src
	}
	if sc.BudgetUSD != nil {
		e.BudgetUSD, e.Sources["budget_usd"] = positive(sc.BudgetUSD), src
	}
	if sc.AgentSessionResume != nil {
		e.SessionResume, e.Sources["agent_session_resume"] = *sc.AgentSessionResume, src
	}
	if sc.RetentionDays != nil {
		e.RetentionDays, e.Sources["retention_days"] = *sc.RetentionDays, src
	}
	if sc.AutoMerge != nil {
		e.AutoMerge, e.Sources["auto_merge"] = *sc.AutoMerge, src
	}
	if sc.MergeMethod != nil {
		e.MergeMethod, e.Sources["merge_method"] = cmp.Or(*sc.MergeMethod, defaultMergeMethod), src
	}
	if sc.Shadow != nil {
		e.Shadow, e.Sources["shadow"] = *sc.Shadow, src
	}
	if sc.SelfReview != nil {
		e.SelfReview, e.Sources["self_review"] = *sc.SelfReview, src
	}
	for p, a := range sc.Phases {
		e.Phases[p], e.Sources["phases."+p] = a, src
	}
}

// Agent returns the agent bound to phase for this project, falling back to "default".
func (e Effective) Agent(phase string) string { return e.Phases.Agent(phase) }

func positive(f *float64) *float64 {
	if f == nil || *f <= 0 {
		return nil
	}
	v := *f
	return &v
}

// scopeChain returns project and its enclosing organizations, narrowest first
// ("g/sub/p" → "g/sub/p", "g/sub", "g").
func scopeChain(project string) []string {
	var out []string
	for p := strings.Trim(project, "/"); p != ""; {
		out = append(out, p)
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return out
}

// Entry is one effective setting as config check and the settings page show it.
type Entry struct {
	// Key is the setting's name ("budget_usd", "phases.development").
	Key string
	// Value is the value, formatted ("none" for no budget).
	Value string
	// Source is where it came from ("default", "global", "org acme", "project acme/shop").
	Source string
}

// Entries returns the settings in ScopedKeys order, then the phase bindings by phase.
func (e Effective) Entries() []Entry {
	val := map[string]string{
		"branch_prefix":        strconv.Quote(e.BranchPrefix),
		"question_deadline":    e.QuestionDeadline.String(),
		"ci_fix_attempts":      strconv.Itoa(e.CIFixAttempts),
		"budget_usd":           "none",
		"agent_session_resume": strconv.FormatBool(e.SessionResume),
		"retention_days":       "0 (keep everything)",
		"auto_merge":           strconv.FormatBool(e.AutoMerge),
		"merge_method":         e.MergeMethod,
		"shadow":               strconv.FormatBool(e.Shadow),
		"self_review":          strconv.FormatBool(e.SelfReview),
	}
	if e.BudgetUSD != nil {
		val["budget_usd"] = fmt.Sprintf("%.2f", *e.BudgetUSD)
	}
	if e.RetentionDays > 0 {
		val["retention_days"] = strconv.Itoa(e.RetentionDays)
	}
	var out []Entry
	for _, k := range ScopedKeys {
		out = append(out, Entry{Key: k, Value: val[k], Source: e.Sources[k]})
	}
	for _, p := range slices.Sorted(maps.Keys(e.Phases)) {
		out = append(out, Entry{Key: "phases." + p, Value: e.Phases[p], Source: e.Sources["phases."+p]})
	}
	return out
}

// Lines returns Entries as "key = value (source)" lines, for config check.
func (e Effective) Lines() []string {
	var out []string
	for _, x := range e.Entries() {
		out = append(out, fmt.Sprintf("%s = %s (%s)", x.Key, x.Value, x.Source))
	}
	return out
}

// validateScopes checks every scope's name and values.
func (c *Config) validateScopes(v *validator) {
	v.sameWithoutCase("scopes", slices.Sorted(maps.Keys(c.Scopes)))
	v.sameWithoutCase("sessions.overrides", slices.Sorted(maps.Keys(c.Sessions.Overrides)))
	for _, name := range slices.Sorted(maps.Keys(c.Scopes)) {
		sc := c.Scopes[name]
		key := "scopes." + name
		if strings.Trim(name, "/") != name || name == "" || strings.Contains(name, "//") {
			v.add(key, "must be an organization or a project path (acme, acme/shop, group/sub/project)")
		}
		if sc.QuestionDeadline != nil {
			v.positive(key+".question_deadline", *sc.QuestionDeadline)
		}
		if sc.CIFixAttempts != nil {
			v.atLeast(key+".ci_fix_attempts", int64(*sc.CIFixAttempts), 0)
		}
		if sc.BudgetUSD != nil && *sc.BudgetUSD < 0 {
			v.add(key+".budget_usd", "must not be negative")
		}
		if sc.RetentionDays != nil {
			v.retentionDays(key+".retention_days", *sc.RetentionDays)
		}
		c.validateAPIBindings(v, key+".phases", scopedPhases(c.Phases, sc.Phases))
		if sc.MergeMethod != nil {
			v.mergeMethod(key+".merge_method", *sc.MergeMethod)
		}
		for p, a := range sc.Phases {
			if !slices.Contains(knownPhases, p) {
				v.add(key+".phases."+p, "unknown phase; known: %s", strings.Join(knownPhases, ", "))
			} else if _, ok := c.Agent(a); !ok {
				v.add(key+".phases."+p, "unknown agent %q", a)
			}
		}
	}
}
