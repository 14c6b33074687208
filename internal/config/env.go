package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = "ALFRED_"

// Variables of the named lists: ALFRED_FORGES_<NAME>_<FIELD> and ALFRED_AGENTS_<NAME>_<FIELD>.
var (
	forgeEnvFields = []string{"KIND", "BASE_URL", "TOKEN", "TOKEN_FILE", "WEBHOOK_SECRET",
		"WEBHOOK_SECRET_FILE", "BOT_USER", "OTHER_BOTS", "GIT_USER", "MAX_COMMENT_BYTES", "MAX_DESCRIPTION_BYTES",
		"TRANSPORT", "POLL_INTERVAL"}
	agentEnvFields = []string{"ADAPTER", "IMAGE", "SCRIPT", "API_KEY", "API_KEY_FILE", "MODEL"}
)

// EnvName returns how a forge or agent name appears in variable names: upper-cased, with
// every character other than a letter or a digit replaced by '_' ("my-forge" → "MY_FORGE").
func EnvName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, name)
}

// applyEnv applies the ALFRED_* variables of environ over c. Empty variables count as unset.
func (c *Config) applyEnv(environ []string) error {
	vars := map[string]string{}
	for k, v := range env.ToMap(environ) {
		if strings.HasPrefix(k, EnvPrefix) && v != "" {
			vars[k] = v
		}
	}
	if err := parseTagged(c, vars); err != nil {
		return err
	}
	errs := []error{
		setSecretFromEnv(vars, EnvPrefix+"DATABASE_URL", &c.DatabaseURL, &c.DatabaseURLFile),
		setSecretFromEnv(vars, EnvPrefix+"ADMIN_TOKEN", &c.Admin.Token, &c.Admin.TokenFile),
		c.applyForgesEnv(vars),
		c.applyAgentsEnv(vars),
	}
	c.applyPhasesEnv(vars)
	return errors.Join(errs...)
}

// parseTagged sets the fields that have an env tag (the scalar settings) with caarlos0/env.
// That library names the Go field, not the variable, in its errors, so on failure each set
// variable is parsed alone to name the culprits.
func parseTagged(c *Config, vars map[string]string) error {
	opts := env.Options{Environment: vars, Prefix: EnvPrefix}
	err := env.ParseWithOptions(c, opts)
	if err == nil {
		return nil
	}
	params, perr := env.GetFieldParamsWithOptions(&Config{}, opts)
	if perr != nil {
		return fmt.Errorf("parse environment: %w", err)
	}
	var errs []error
	for _, p := range params {
		v, ok := vars[p.Key]
		if !ok {
			continue
		}
		if err := env.ParseWithOptions(&Config{}, env.Options{Environment: map[string]string{p.Key: v}, Prefix: EnvPrefix}); err != nil {
			var agg env.AggregateError
			if errors.As(err, &agg) && len(agg.Errors) == 1 {
				err = agg.Errors[0]
			}
			errs = append(errs, &FieldError{Key: p.Key, Reason: err.Error()})
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("parse environment: %w", err)
	}
	return errors.Join(errs...)
}

// setSecretFromEnv applies key and key_FILE to a secret. Setting both is an error.
func setSecretFromEnv(vars map[string]string, key string, val *Secret, file *string) error {
	plain, hasPlain := vars[key]
	path, hasFile := vars[key+"_FILE"]
	switch {
	case hasPlain && hasFile:
		return &FieldError{Key: key, Reason: "both " + key + " and " + key + "_FILE are set"}
	case hasPlain:
		*val, *file = Secret(plain), ""
	case hasFile:
		v, err := ReadSecretFile(path)
		if err != nil {
			return &FieldError{Key: key + "_FILE", Reason: err.Error()}
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs // so that readSecretFiles never resolves it against the YAML directory
		}
		*val, *file = v, path
	}
	return nil
}

// splitNamed groups the variables ALFRED_<group>_<NAME>_<FIELD> by NAME and FIELD. FIELD is
// the longest known field that ends the variable, so NAME may itself hold '_'. An unknown
// variable under the group is an error, to catch typos.
func splitNamed(vars map[string]string, group string, fields []string) (map[string]map[string]string, error) {
	prefix := EnvPrefix + group + "_"
	byLen := slices.SortedFunc(slices.Values(fields), func(a, b string) int { return len(b) - len(a) })
	out := map[string]map[string]string{}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(vars)) {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		i := slices.IndexFunc(byLen, func(f string) bool {
			return len(rest) > len(f)+1 && strings.HasSuffix(rest, "_"+f)
		})
		if i < 0 {
			errs = append(errs, &FieldError{Key: key, Reason: fmt.Sprintf(
				"unknown variable: want %s<NAME>_<FIELD> with FIELD one of %s", prefix, strings.Join(fields, ", "))})
			continue
		}
		name := rest[:len(rest)-len(byLen[i])-1]
		if out[name] == nil {
			out[name] = map[string]string{}
		}
		out[name][byLen[i]] = vars[key]
	}
	return out, errors.Join(errs...)
}

// findNamed returns the index of the single entry whose EnvName is envName, -1 if none.
func findNamed(names []string, envName, key string) (int, error) {
	found := -1
	for i, n := range names {
		if EnvName(n) != envName {
			continue
		}
		if found >= 0 {
			return -1, &FieldError{Key: key, Reason: fmt.Sprintf("%q and %q both map to %s", names[found], n, envName)}
		}
		found = i
	}
	return found, nil
}

// applyForgesEnv applies ALFRED_FORGES_<NAME>_<FIELD>. A NAME that matches no forge of the file
// declares a new forge named strings.ToLower(NAME).
func (c *Config) applyForgesEnv(vars map[string]string) error {
	byName, err := splitNamed(vars, "FORGES", forgeEnvFields)
	errs := []error{err}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		fields, prefix := byName[name], EnvPrefix+"FORGES_"+name+"_"
		names := make([]string, len(c.Forges))
		for i, f := range c.Forges {
			names[i] = f.Name
		}
		i, err := findNamed(names, name, prefix+"*")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if i < 0 {
			c.Forges = append(c.Forges, Forge{Name: strings.ToLower(name)})
			i = len(c.Forges) - 1
		}
		f := &c.Forges[i]
		f.Kind = cmp.Or(forge.Kind(fields["KIND"]), f.Kind)
		f.BaseURL = cmp.Or(fields["BASE_URL"], f.BaseURL)
		f.BotUser = cmp.Or(fields["BOT_USER"], f.BotUser)
		f.GitUser = cmp.Or(fields["GIT_USER"], f.GitUser)
		if v, ok := fields["OTHER_BOTS"]; ok {
			f.OtherBots = splitList(v)
		}
		if v, ok := fields["TRANSPORT"]; ok {
			f.Transport = parseTransports(v)
		}
		if v, ok := fields["POLL_INTERVAL"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, &FieldError{Key: prefix + "POLL_INTERVAL", Reason: "not a duration such as 15s"})
			} else {
				f.PollInterval = d
			}
		}
		for key, dst := range map[string]*int{"MAX_COMMENT_BYTES": &f.MaxCommentBytes, "MAX_DESCRIPTION_BYTES": &f.MaxDescriptionBytes} {
			if v, ok := fields[key]; ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					errs = append(errs, &FieldError{Key: prefix + key, Reason: "not a whole number of bytes"})
					continue
				}
				*dst = n
			}
		}
		errs = append(errs,
			setSecretFromEnv(vars, prefix+"TOKEN", &f.Token, &f.TokenFile),
			setSecretFromEnv(vars, prefix+"WEBHOOK_SECRET", &f.WebhookSecret, &f.WebhookSecretFile))
	}
	return errors.Join(errs...)
}

// applyAgentsEnv applies ALFRED_AGENTS_<NAME>_<FIELD>, declaring new agents like
// applyForgesEnv declares forges.
func (c *Config) applyAgentsEnv(vars map[string]string) error {
	byName, err := splitNamed(vars, "AGENTS", agentEnvFields)
	errs := []error{err}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		fields, prefix := byName[name], EnvPrefix+"AGENTS_"+name+"_"
		names := make([]string, len(c.Agents))
		for i, a := range c.Agents {
			names[i] = a.Name
		}
		i, err := findNamed(names, name, prefix+"*")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if i < 0 {
			c.Agents = append(c.Agents, Agent{Name: strings.ToLower(name)})
			i = len(c.Agents) - 1
		}
		a := &c.Agents[i]
		a.Adapter = cmp.Or(fields["ADAPTER"], a.Adapter)
		a.Image = cmp.Or(fields["IMAGE"], a.Image)
		a.Script = cmp.Or(fields["SCRIPT"], a.Script)
		a.Model = cmp.Or(fields["MODEL"], a.Model)
		errs = append(errs, setSecretFromEnv(vars, prefix+"API_KEY", &a.APIKey, &a.APIKeyFile))
	}
	return errors.Join(errs...)
}

// applyPhasesEnv applies ALFRED_PHASES_<PHASE>=<agent>, merged into the file's phases.
func (c *Config) applyPhasesEnv(vars map[string]string) {
	for key, v := range vars {
		phase, ok := strings.CutPrefix(key, EnvPrefix+"PHASES_")
		if !ok {
			continue
		}
		if c.Phases == nil {
			c.Phases = Phases{}
		}
		c.Phases[strings.ToLower(phase)] = v
	}
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
