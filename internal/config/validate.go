package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// FieldError is one invalid setting. Key is the YAML path ("forges[1].base_url") or the
// environment variable; Reason never quotes a secret value.
type FieldError struct {
	Key    string
	Reason string
}

// Error returns "key: reason".
func (e *FieldError) Error() string { return e.Key + ": " + e.Reason }

// nameRE is the syntax of forge and agent names.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// validator collects FieldErrors.
type validator []error

func (v *validator) add(key, format string, args ...any) {
	*v = append(*v, &FieldError{Key: key, Reason: fmt.Sprintf(format, args...)})
}

func (v *validator) required(key, value string) {
	if strings.TrimSpace(value) == "" {
		v.add(key, "required")
	}
}

func (v *validator) positive(key string, d time.Duration) {
	if d <= 0 {
		v.add(key, "must be a positive duration, got %s", d)
	}
}

// mergeMethod checks a merge method: "", merge, squash or rebase (forge.ParseMergeMethod).
func (v *validator) mergeMethod(key, m string) {
	if _, err := forge.ParseMergeMethod(m); err != nil {
		v.add(key, "must be merge, squash or rebase, not %q", m)
	}
}

func (v *validator) atLeast(key string, n, minimum int64) {
	if n < minimum {
		v.add(key, "must be at least %d, got %d", minimum, n)
	}
}

// MaxRetentionDays bounds retention_days: 100 years, far below the 106,751 days a
// time.Duration holds, so that the retention's age never overflows into a negative one (which
// would purge what was closed an hour ago).
const MaxRetentionDays = 36500

func (v *validator) retentionDays(key string, n int) {
	if n < 0 || n > MaxRetentionDays {
		v.add(key, "must be between 0 (keep for ever) and %d days (100 years), got %d", MaxRetentionDays, n)
	}
}

// sameWithoutCase refuses each of keys (the names under prefix) that names the same path as an
// earlier one without case, as both forges compare paths: a lookup (lookupFold) could take
// either.
func (v *validator) sameWithoutCase(prefix string, keys []string) {
	seen := map[string]string{}
	for _, k := range keys {
		low := strings.ToLower(k)
		if first, ok := seen[low]; ok {
			v.add(prefix+"."+k, "names the same path as %s.%s: paths are compared without case", prefix, first)
			continue
		}
		seen[low] = k
	}
}

// lookupFold returns m's entry for key, compared as GitLab and Forgejo compare paths: without
// case (an exact match first), and the entry's own key.
func lookupFold[V any](m map[string]V, key string) (V, string, bool) {
	if v, ok := m[key]; ok {
		return v, key, true
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v, k, true
		}
	}
	var zero V
	return zero, "", false
}

// httpURL checks an absolute http(s) URL without credentials. The value is not quoted in
// errors because a URL may carry a password.
func (v *validator) httpURL(key, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.add(key, "must be an absolute http:// or https:// URL")
	case u.User != nil:
		v.add(key, "must not hold credentials; use the token settings")
	}
}

// name checks a forge or agent name and its uniqueness.
func (v *validator) name(key, name string, seen map[string]bool) {
	switch {
	case !nameRE.MatchString(name):
		v.add(key, "%q must match %s", name, nameRE)
	case seen[name]:
		v.add(key, "duplicate name %q", name)
	case seen[EnvName(name)]:
		v.add(key, "%q has the same environment name (%s) as another entry", name, EnvName(name))
	}
	seen[name], seen[EnvName(name)] = true, true
}

// instanceRE is the form of runner.instance.
var instanceRE = regexp.MustCompile(`^[a-z0-9]{1,12}$`)

// Validate checks the whole configuration and returns every problem at once, joined
// (errors.Join of *FieldError).
func (c *Config) Validate() error {
	var v validator
	c.validateServer(&v)
	c.validateForges(&v)
	c.validateLabels(&v)
	c.validateLifecycle(&v)
	c.validateWorkers(&v)
	c.validateRunner(&v)
	c.validateAgents(&v)
	c.validatePhases(&v)
	c.validateSecrets(&v)
	return errors.Join(v...)
}

// validateServer checks the listeners, the HTTP limits, the database pool and the admin listener.
func (c *Config) validateServer(v *validator) {
	v.required("listen", c.Listen)
	if c.PublicURL != "" {
		v.httpURL("public_url", c.PublicURL)
	}
	v.required("data_dir", c.DataDir)
	v.atLeast("max_body_bytes", c.MaxBodyBytes, 1)
	v.positive("http.read_header_timeout", c.HTTP.ReadHeaderTimeout)
	v.positive("http.read_timeout", c.HTTP.ReadTimeout)
	v.positive("http.write_timeout", c.HTTP.WriteTimeout)
	v.positive("http.idle_timeout", c.HTTP.IdleTimeout)
	v.atLeast("http.max_concurrent", int64(c.HTTP.MaxConcurrent), 1)
	v.atLeast("http.max_readers", int64(c.HTTP.MaxReaders), 1)
	v.atLeast("http.max_body_memory", c.HTTP.MaxBodyMemory, 1)
	v.atLeast("http.max_header_bytes", int64(c.HTTP.MaxHeaderBytes), 1024)
	v.atLeast("database.max_open_conns", int64(c.Database.MaxOpenConns), 1)
	v.atLeast("database.max_idle_conns", int64(c.Database.MaxIdleConns), 0)
	v.positive("database.conn_max_lifetime", c.Database.ConnMaxLifetime)
	v.positive("database.conn_max_idle_time", c.Database.ConnMaxIdleTime)
	if c.Admin.Listen != "" {
		v.required("admin.token", string(c.Admin.Token))
		if c.Admin.Listen == c.Listen {
			v.add("admin.listen", "must differ from listen: the webhook port serves webhooks, health and readiness only")
		}
	}
}

// validateForges checks every forge: kind, URL, secrets, bot and git users, post limits, projects.
func (c *Config) validateForges(v *validator) {
	if len(c.Forges) == 0 {
		v.add("forges", "at least one forge is required")
	}
	seen := map[string]bool{}
	for i, f := range c.Forges {
		key := fmt.Sprintf("forges[%d]", i)
		v.name(key+".name", f.Name, seen)
		if !f.Kind.Valid() {
			v.add(key+".kind", "%q is not gitlab or forgejo", f.Kind)
		}
		v.httpURL(key+".base_url", f.BaseURL)
		v.required(key+".token", string(f.Token))
		if f.Transport.Webhook() { // a forge that is only polled receives no delivery to verify
			v.required(key+".webhook_secret", string(f.WebhookSecret))
		}
		v.transport(key, f)
		v.required(key+".bot_user", f.BotUser)
		v.required(key+".git_user", f.GitUser)
		if f.MaxCommentBytes != 0 {
			v.atLeast(key+".max_comment_bytes", int64(f.MaxCommentBytes), 1024)
		}
		if f.MaxDescriptionBytes != 0 {
			v.atLeast(key+".max_description_bytes", int64(f.MaxDescriptionBytes), 1024)
		}
		for j, b := range f.OtherBots {
			v.required(fmt.Sprintf("%s.other_bots[%d]", key, j), b)
		}
		for j, repo := range f.Repositories {
			if strings.Trim(repo, "/") != repo || !strings.Contains(repo, "/") || strings.TrimSpace(repo) != repo {
				v.add(fmt.Sprintf("%s.repositories[%d]", key, j), "%q is not a repository path such as group/repo", repo)
			}
		}
		for repo, p := range f.Projects {
			pkey := fmt.Sprintf("%s.projects[%q]", key, repo)
			if strings.Trim(repo, "/") != repo || strings.TrimSpace(repo) == "" {
				v.add(pkey, "a repository path such as group/repo, without leading or trailing '/'")
			}
			for j, d := range p.Sparse {
				if d == "" || strings.HasPrefix(d, "/") || strings.HasPrefix(d, "-") || slices.Contains(strings.Split(d, "/"), "..") {
					v.add(fmt.Sprintf("%s.sparse[%d]", pkey, j), "%q is not a directory relative to the repository root", d)
				}
			}
		}
	}
}

// validateLabels checks the label names: each set, none used twice.
func (c *Config) validateLabels(v *validator) {
	labels := map[string]string{}
	for _, l := range c.labelsByKey() {
		key, name := l[0], l[1]
		if strings.TrimSpace(name) == "" {
			v.add("labels."+key, "required")
			continue
		}
		if other, dup := labels[name]; dup {
			v.add("labels."+key, "same label %q as labels.%s", name, other)
			continue
		}
		labels[name] = key
	}
}

// validateLifecycle checks the lifecycle timers and bounds.
func (c *Config) validateLifecycle(v *validator) {
	v.positive("lifecycle.question_deadline", c.Lifecycle.QuestionDeadline)
	v.positive("lifecycle.ci_wait", c.Lifecycle.CIWait)
	v.positive("lifecycle.ci_poll", c.Lifecycle.CIPoll)
	v.atLeast("lifecycle.ci_fix_attempts", int64(c.Lifecycle.CIFixAttempts), 0)
	v.atLeast("lifecycle.review_fix_attempts", int64(c.Lifecycle.ReviewFixAttempts), 0)
	v.mergeMethod("lifecycle.merge_method", c.Lifecycle.MergeMethod)
	if n := c.Lifecycle.AutoMergeMinApprovals; n != nil {
		v.atLeast("lifecycle.auto_merge_min_approvals", int64(*n), 0)
	}
	if _, err := c.Permissions.Needs(); err != nil {
		v.add("permissions", "%v", err)
	}
	v.positive("permissions.cache", c.Permissions.Cache)
	v.atLeast("lifecycle.retry_until_green_max", int64(c.Lifecycle.RetryUntilGreenMax), 1)
	v.positive("lifecycle.review_quiet", c.Lifecycle.ReviewQuiet)
	v.required("lifecycle.branch_prefix", c.Lifecycle.BranchPrefix)
	v.required("lifecycle.git_name", c.Lifecycle.GitName)
	v.required("lifecycle.git_email", c.Lifecycle.GitEmail)
	v.atLeast("self_review.max_rounds", int64(c.SelfReview.MaxRounds), 1)
}

// validateWorkers checks the workers.
func (c *Config) validateWorkers(v *validator) {
	v.atLeast("workers.count", int64(c.Workers.Count), 1)
	if c.Workers.LeaseTTL < 3*time.Second { // its heartbeat runs every third of it
		v.add("workers.lease_ttl", "must be at least 3s, got %s", c.Workers.LeaseTTL)
	}
	v.positive("workers.poll_interval", c.Workers.PollInterval)
	v.positive("workers.reconcile_interval", c.Workers.ReconcileInterval)
	v.atLeast("workers.reconcile_batch", int64(c.Workers.ReconcileBatch), 1)
	v.atLeast("workers.runs", int64(c.Workers.Runs), 1)
	v.atLeast("workers.poison_attempts", int64(c.Workers.PoisonAttempts), 1)
	v.atLeast("workers.runs_per_project", int64(c.Workers.RunsPerProject), 0)
}

// validateRunner checks the container limits: never root, positive limits.
func (c *Config) validateRunner(v *validator) {
	if c.Runner.Instance != "" && !instanceRE.MatchString(c.Runner.Instance) {
		v.add("runner.instance", "%q must be 1 to 12 lowercase letters and digits (it is part of container, Pod and network names)", c.Runner.Instance)
	}
	if c.Runner.UID == 0 {
		v.add("runner.uid", "must not be 0: agents never run as root")
	}
	v.atLeast("runner.uid", int64(c.Runner.UID), 0)
	v.atLeast("runner.gid", int64(c.Runner.GID), 0)
	v.atLeast("runner.memory_bytes", c.Runner.MemoryBytes, 1)
	if c.Runner.CPUs <= 0 {
		v.add("runner.cpus", "must be positive, got %g", c.Runner.CPUs)
	}
	v.atLeast("runner.pids", c.Runner.PIDs, 1)
	v.positive("runner.timeout", c.Runner.Timeout)
	v.atLeast("runner.max_output_bytes", c.Runner.MaxOutputBytes, 1)
	switch c.Runner.EgressMode() {
	case EgressAllowlist:
		if c.Runner.HostNetwork {
			v.add("runner.egress.mode", "allowlist cannot hold a run on the host network (runner.host_network): set mode: open, or host_network: false")
		}
	case EgressOpen:
	default:
		v.add("runner.egress.mode", "must be %q or %q, got %q", EgressAllowlist, EgressOpen, c.Runner.Egress.Mode)
	}
	for i, a := range c.Runner.Egress.Allow {
		if err := checkHostPort(a); err != nil {
			v.add(fmt.Sprintf("runner.egress.allow[%d]", i), "%v", err)
		}
	}
	switch c.Runner.Runtime {
	case RuntimeDocker:
	case RuntimeKubernetes:
		k := c.Runner.Kubernetes
		if c.Runner.HostNetwork {
			v.add("runner.host_network", "is refused with the Kubernetes runtime: a Pod on the host network is outside the runs' NetworkPolicy and Pod Security restricted")
		}
		if err := k.CheckPlacement(); err != nil {
			v.add("runner.kubernetes", "%v", err)
		}
		c.validateRequests(v)
		if k.StartTimeout < 0 {
			v.add("runner.kubernetes.start_timeout", "must not be negative, got %s", k.StartTimeout)
		}
		v.required("runner.kubernetes.namespace", k.Namespace)
		v.required("runner.kubernetes.state_claim", k.StateClaim)
		if !slices.Contains([]string{"IfNotPresent", "Always", "Never"}, k.PullPolicy) {
			v.add("runner.kubernetes.pull_policy", "must be IfNotPresent, Always or Never, got %q", k.PullPolicy)
		}
		if c.Runner.EgressMode() == EgressAllowlist && k.EgressGateImage == "" {
			v.add("runner.kubernetes.egress_gate_image", "is required with runner.egress.mode allowlist: Alfred's own image, "+
				"whose `alfred egress-gate` holds each run until the runs' NetworkPolicy filters its Pod (spec/kubernetes.md, \"Egress\")")
		}
		if t := k.EgressGateTarget; t != "" {
			if err := checkHostPort(t); err != nil {
				v.add("runner.kubernetes.egress_gate_target", "%v", err)
			}
		}
	default:
		v.add("runner.runtime", "must be %q or %q, got %q", RuntimeDocker, RuntimeKubernetes, c.Runner.Runtime)
	}
}

// validateRequests checks runner.kubernetes.requests: known resources, positive quantities,
// none above its limit (the Pod's limits are runner.cpus, rounded up to a millicore,
// runner.Limits.MilliCPUs, and runner.memory_bytes).
func (c *Config) validateRequests(v *validator) {
	req, err := c.Runner.Kubernetes.ResourceRequests()
	if err != nil {
		v.add("runner.kubernetes", "%v", err)
		return
	}
	if q, ok := req[corev1.ResourceCPU]; ok {
		if limit := (runner.Limits{NanoCPUs: c.Runner.NanoCPUs()}).MilliCPUs(); q.MilliValue() > limit {
			v.add("runner.kubernetes.requests.cpu", "%s is above the limit, runner.cpus %g: Kubernetes refuses a request above its limit", q.String(), c.Runner.CPUs)
		}
	}
	if q, ok := req[corev1.ResourceMemory]; ok && q.Value() > c.Runner.MemoryBytes {
		v.add("runner.kubernetes.requests.memory", "%s is above the limit, runner.memory_bytes %d: Kubernetes refuses a request above its limit", q.String(), c.Runner.MemoryBytes)
	}
}

// validateAgents checks the agents: unique names, known adapters, an image each.
func (c *Config) validateAgents(v *validator) {
	if len(c.Agents) == 0 {
		v.add("agents", "at least one agent is required")
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		v.name(key+".name", a.Name, seen)
		switch a.Adapter {
		case AdapterScript:
			v.required(key+".script", a.Script)
		case AdapterClaudeCode, AdapterCodex, AdapterOpencode, AdapterCopilot, AdapterGemini:
		case AdapterAnthropicAPI, AdapterOpenAIAPI:
			validateAPIAgent(v, key, a)
			continue // no image: API mode runs no container
		default:
			v.add(key+".adapter", "%q is not one of %s, %s, %s, %s, %s, %s, %s, %s", a.Adapter, AdapterScript,
				AdapterClaudeCode, AdapterCodex, AdapterOpencode, AdapterCopilot, AdapterGemini, AdapterAnthropicAPI, AdapterOpenAIAPI)
		}
		v.required(key+".image", a.Image)
		if a.BaseURL != "" { // the CLI's model endpoint: reached through the egress allowlist
			v.httpURL(key+".base_url", a.BaseURL)
		}
	}
}

// validatePhases checks the phase bindings, the budget, retention and the scoped settings.
func (c *Config) validatePhases(v *validator) {
	if c.Phases[PhaseDefault] == "" {
		v.add("phases.default", "required unless exactly one agent is declared")
	}
	for _, phase := range slices.Sorted(maps.Keys(c.Phases)) {
		agent := c.Phases[phase]
		if !slices.Contains(knownPhases, phase) {
			v.add("phases."+phase, "unknown phase; want one of %s", strings.Join(knownPhases, ", "))
			continue
		}
		if _, ok := c.Agent(agent); !ok && agent != "" {
			v.add("phases."+phase, "agent %q is not declared in agents", agent)
		}
	}
	c.validateAPIBindings(v, "phases", c.Phases)
	if c.Lifecycle.BudgetUSD != nil && *c.Lifecycle.BudgetUSD < 0 {
		v.add("lifecycle.budget_usd", "must not be negative")
	}
	v.retentionDays("retention_days", c.RetentionDays)
	c.validateScopes(v)
}

// labelsByKey returns {YAML key, label name} pairs of c.Labels in declaration order, read from
// mailbox.Labels' yaml tags.
func (c *Config) labelsByKey() [][2]string {
	v := reflect.ValueOf(c.Labels)
	var out [][2]string
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		out = append(out, [2]string{key, v.Field(i).String()})
	}
	return out
}

// secretFix is the remedy every refused secret's message ends with.
const secretFix = "set a random value of 16 bytes or more instead (openssl rand -hex 16)"

// validateSecrets refuses a secret the censor would confuse with ordinary text (spec/edge.md,
// "Secrets the censor can tell from text"): one shorter than censor.MinLen, one that is a single
// word, and one found in Alfred's own structure (its hidden markers, comment kinds and key
// words, description section names, label names). The censor hides every occurrence of every
// secret in logs, comments and descriptions; such a secret would cut Alfred's own words out of
// them. The password of database_url is checked on its own. Messages never quote the value.
func (c *Config) validateSecrets(v *validator) {
	own := slices.Concat(mailbox.Vocabulary(), c.Labels.WithDefaults().All())
	for _, ks := range c.KeyedSecrets() {
		if ks.Key == "database_url" {
			continue
		}
		why := confusable(ks.Value.Reveal(), own)
		switch {
		case why == "":
		case ks.Key == keyDatabasePassword:
			v.add("database_url", "the password %s; give the database role a random password of 16 bytes "+
				"or more (ALTER ROLE %s PASSWORD '…') and put it in database_url (the development "+
				"database: run scripts/dev-deps.sh again)", why, c.databaseUser().Username())
		default:
			v.add(ks.Key, "%s; %s", why, secretFix)
		}
	}
}

// confusable says why the censor would confuse secret with ordinary text, "" when it would not.
func confusable(secret string, own []string) string {
	switch {
	case len(secret) < censor.MinLen:
		return fmt.Sprintf("is shorter than %d bytes: the censor, which hides every secret in logs, comments "+
			"and descriptions, would also hide every word equal to it", censor.MinLen)
	case !strings.ContainsFunc(strings.TrimSpace(secret), func(r rune) bool { return !unicode.IsLetter(r) }):
		return "is a single word: the censor, which hides every secret in logs, comments and descriptions, " +
			"would hide that word wherever it is written"
	case !strings.ContainsFunc(secret, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsSpace(r) }):
		return "is made of words only: the censor, which hides every secret in logs, comments and descriptions, " +
			"would hide those words wherever they are written"
	case slices.ContainsFunc(own, func(t string) bool { return strings.Contains(t, secret) }):
		return "occurs in Alfred's own texts (its hidden comment markers, comment kinds, section or label " +
			"names): the censor would cut it out of them, and Alfred could no longer find its own comments"
	}
	return ""
}

// checkHostPort checks an egress allowlist entry: host:port (a name, an IP address, [v6]:port,
// or *.domain:port), the port 1–65535.
func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil || host == "" {
		return fmt.Errorf("want host:port, got %q", hp)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port of %q is not 1–65535", hp)
	}
	if rest, ok := strings.CutPrefix(host, "*."); strings.Contains(host, "*") && (!ok || rest == "" || strings.Contains(rest, "*")) {
		return fmt.Errorf("%q: a wildcard is one leading \"*.\" before a domain", hp)
	}
	return nil
}
