package mailbox

import (
	"cmp"
	"slices"
	"strings"
)

// Labels names the scoped labels Alfred reads and writes. Zero fields take the defaults
// (DefaultLabels). Exactly one status label is on an issue at a time. The yaml and env tags are
// the configuration keys: labels.<yaml key> in alfred.yaml, ALFRED_LABELS_<env name> in the
// environment (package internal/config embeds this type).
type Labels struct {
	// FunctionalAnalysis marks an issue under functional analysis.
	FunctionalAnalysis string `yaml:"functional_analysis" env:"FUNCTIONAL_ANALYSIS"`
	// WaitingInfo marks an issue waiting for an answer from a human.
	WaitingInfo string `yaml:"waiting_info" env:"WAITING_INFO"`
	// TechnicalAnalysis marks an issue under technical analysis.
	TechnicalAnalysis string `yaml:"technical_analysis" env:"TECHNICAL_ANALYSIS"`
	// WaitingValidation marks a plan waiting for a human's validation.
	WaitingValidation string `yaml:"waiting_validation" env:"WAITING_VALIDATION"`
	// InDevelopment marks an issue whose development (or CI fix, or answer) phase runs.
	InDevelopment string `yaml:"in_development" env:"IN_DEVELOPMENT"`
	// InCI marks a merge request waiting for its pipeline.
	InCI string `yaml:"in_ci" env:"IN_CI"`
	// InReview marks a merge request in review.
	InReview string `yaml:"in_review" env:"IN_REVIEW"`
	// Blocked marks an issue Alfred cannot progress.
	Blocked string `yaml:"blocked" env:"BLOCKED"`
	// Done marks a finished issue.
	Done string `yaml:"done" env:"DONE"`
	// TypeTask marks an issue to implement.
	TypeTask string `yaml:"type_task" env:"TYPE_TASK"`
	// TypeBug marks a bug to fix.
	TypeBug string `yaml:"type_bug" env:"TYPE_BUG"`
	// TypeAnalysis marks an issue that only wants an analysis.
	TypeAnalysis string `yaml:"type_analysis" env:"TYPE_ANALYSIS"`
	// TypeQuestion marks a question to answer.
	TypeQuestion string `yaml:"type_question" env:"TYPE_QUESTION"`
	// ValidatePlan is added by a maintainer to validate the technical plan.
	ValidatePlan string `yaml:"validate_plan" env:"VALIDATE_PLAN"`
	// Retry is added by a maintainer to run the blocked (or last failed) phase again now.
	Retry string `yaml:"retry" env:"RETRY"`
	// RetryOnce grants one more run even when the phase's attempts or the budget are
	// used up; Alfred removes it.
	RetryOnce string `yaml:"retry_once" env:"RETRY_ONCE"`
	// RetryUntilGreen lets ci_fix and review_fix go past their bound until CI is green, up to
	// lifecycle.retry_until_green_max runs.
	RetryUntilGreen string `yaml:"retry_until_green" env:"RETRY_UNTIL_GREEN"`
	// AutoMerge, added by a writer, lets Alfred merge the merge request through the
	// forge's merge API once CI is green, the forge's required approvals are present and no
	// review thread is open; removing it stops that.
	AutoMerge string `yaml:"auto_merge" env:"AUTO_MERGE"`
}

// DefaultLabels returns the default names: status::…, type::…, ai::validate_plan, ai::retry….
func DefaultLabels() Labels {
	return Labels{
		FunctionalAnalysis: "status::functional_analysis",
		WaitingInfo:        "status::waiting_info",
		TechnicalAnalysis:  "status::technical_analysis",
		WaitingValidation:  "status::waiting_validation",
		InDevelopment:      "status::in_development",
		InCI:               "status::in_ci",
		InReview:           "status::in_review",
		Blocked:            "status::blocked",
		Done:               "status::done",
		TypeTask:           "type::task",
		TypeBug:            "type::bug",
		TypeAnalysis:       "type::analysis",
		TypeQuestion:       "type::question",
		ValidatePlan:       "ai::validate_plan",
		Retry:              "ai::retry",
		RetryOnce:          "ai::retry_once",
		RetryUntilGreen:    "ai::retry_until_green",
		AutoMerge:          "ai::auto_merge",
	}
}

// WithDefaults fills empty names with the defaults.
func (l Labels) WithDefaults() Labels {
	d := DefaultLabels()
	return Labels{
		FunctionalAnalysis: cmp.Or(l.FunctionalAnalysis, d.FunctionalAnalysis),
		WaitingInfo:        cmp.Or(l.WaitingInfo, d.WaitingInfo),
		TechnicalAnalysis:  cmp.Or(l.TechnicalAnalysis, d.TechnicalAnalysis),
		WaitingValidation:  cmp.Or(l.WaitingValidation, d.WaitingValidation),
		InDevelopment:      cmp.Or(l.InDevelopment, d.InDevelopment),
		InCI:               cmp.Or(l.InCI, d.InCI),
		InReview:           cmp.Or(l.InReview, d.InReview),
		Blocked:            cmp.Or(l.Blocked, d.Blocked),
		Done:               cmp.Or(l.Done, d.Done),
		TypeTask:           cmp.Or(l.TypeTask, d.TypeTask),
		TypeBug:            cmp.Or(l.TypeBug, d.TypeBug),
		TypeAnalysis:       cmp.Or(l.TypeAnalysis, d.TypeAnalysis),
		TypeQuestion:       cmp.Or(l.TypeQuestion, d.TypeQuestion),
		ValidatePlan:       cmp.Or(l.ValidatePlan, d.ValidatePlan),
		Retry:              cmp.Or(l.Retry, d.Retry),
		RetryOnce:          cmp.Or(l.RetryOnce, d.RetryOnce),
		RetryUntilGreen:    cmp.Or(l.RetryUntilGreen, d.RetryUntilGreen),
		AutoMerge:          cmp.Or(l.AutoMerge, d.AutoMerge),
	}
}

// Status returns the status label of a state (its row in the lifecycle table); "" for states
// without one (idle, cancelled).
func (l Labels) Status(s State) string { return l.status(def(s).Status) }

// status returns the label a status key names; "" for statusNone.
func (l Labels) status(k statusKey) string {
	switch k {
	case statusFunctionalAnalysis:
		return l.FunctionalAnalysis
	case statusWaitingInfo:
		return l.WaitingInfo
	case statusTechnicalAnalysis:
		return l.TechnicalAnalysis
	case statusWaitingValidation:
		return l.WaitingValidation
	case statusInDevelopment:
		return l.InDevelopment
	case statusInCI:
		return l.InCI
	case statusInReview:
		return l.InReview
	case statusBlocked:
		return l.Blocked
	case statusDone:
		return l.Done
	}
	return ""
}

// statuses lists every status label.
func (l Labels) statuses() []string {
	return []string{l.FunctionalAnalysis, l.WaitingInfo, l.TechnicalAnalysis, l.WaitingValidation,
		l.InDevelopment, l.InCI, l.InReview, l.Blocked, l.Done}
}

// All lists every label Alfred reads or writes: statuses, types, the validation, the retry
// and the auto-merge labels.
func (l Labels) All() []string {
	return append(l.statuses(), l.TypeTask, l.TypeBug, l.TypeAnalysis, l.TypeQuestion, l.ValidatePlan,
		l.Retry, l.RetryOnce, l.RetryUntilGreen, l.AutoMerge)
}

// TypeLabel returns the label of an issue type ("task", "bug", "analysis", "question").
func (l Labels) TypeLabel(typ string) string {
	switch typ {
	case "task":
		return l.TypeTask
	case "bug":
		return l.TypeBug
	case "analysis":
		return l.TypeAnalysis
	case "question":
		return l.TypeQuestion
	}
	return ""
}

// TypeOf returns the issue type named by a type label, "" when the label is not one.
func (l Labels) TypeOf(label string) string {
	for _, t := range []string{"task", "bug", "analysis", "question"} {
		if strings.EqualFold(label, l.TypeLabel(t)) {
			return t
		}
	}
	return ""
}

// StatusDiff returns the labels to add and remove so that the issue carries exactly the
// status label of s and no other status label. Only the difference is written.
func (l Labels) StatusDiff(current []string, s State) (add, remove []string) {
	want := l.Status(s)
	if want != "" && !slices.Contains(current, want) {
		add = append(add, want)
	}
	for _, c := range current {
		if c != want && slices.Contains(l.statuses(), c) {
			remove = append(remove, c)
		}
	}
	return add, remove
}

// diff returns what is in b and not in a (added) and in a and not in b (removed).
func diff(a, b []string) (added, removed []string) {
	for _, x := range b {
		if !slices.Contains(a, x) {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			removed = append(removed, x)
		}
	}
	return added, removed
}
