package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// The transports by which a forge's changes reach Alfred (forges[].transport).
const (
	// TransportWebhook: the forge POSTs a delivery to /webhooks/{name} (the default).
	TransportWebhook = "webhook"
	// TransportPoll: Alfred asks the forge every poll_interval what changed for its bot
	// (Forgejo/Gitea notifications, GitLab to-do list; spec/transport.md).
	TransportPoll = "poll"
	// TransportBoth is the short form of [webhook, poll].
	TransportBoth = "both"
)

// DefaultPollInterval is forges[].poll_interval's default.
const DefaultPollInterval = 15 * time.Second

// Transports is the list forges[].transport holds: "webhook", "poll", both as a list
// ([webhook, poll]) or "both". Empty means webhook. Written in YAML as a string or a list.
type Transports []string

// UnmarshalYAML reads a single name or a list of names; "both" becomes [webhook, poll].
func (t *Transports) UnmarshalYAML(b []byte) error {
	var one string
	if err := yaml.Unmarshal(b, &one); err == nil {
		*t = parseTransports(one)
		return nil
	}
	var list []string
	if err := yaml.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("transport: a name (webhook, poll, both) or a list of names: %w", err)
	}
	var out Transports
	for _, s := range list {
		out = append(out, parseTransports(s)...)
	}
	*t = out
	return nil
}

// parseTransports splits "webhook,poll", expands "both" and lower-cases.
func parseTransports(s string) Transports {
	var out Transports
	for _, p := range strings.Split(s, ",") {
		switch p = strings.ToLower(strings.TrimSpace(p)); p {
		case "":
		case TransportBoth:
			out = append(out, TransportWebhook, TransportPoll)
		default:
			out = append(out, p)
		}
	}
	return out
}

// Webhook reports whether the forge's deliveries are received (the default).
func (t Transports) Webhook() bool { return len(t) == 0 || slices.Contains(t, TransportWebhook) }

// Poll reports whether Alfred polls the forge.
func (t Transports) Poll() bool { return slices.Contains(t, TransportPoll) }

// String names the transports as the pages and alfred doctor show them: "webhook", "poll"
// or "webhook + poll".
func (t Transports) String() string {
	switch {
	case t.Webhook() && t.Poll():
		return "webhook + poll"
	case t.Poll():
		return "poll"
	}
	return "webhook"
}

// validateTransport checks forges[i].transport and poll_interval.
func (v *validator) transport(key string, f Forge) {
	for j, s := range f.Transport {
		if s != TransportWebhook && s != TransportPoll {
			v.add(fmt.Sprintf("%s.transport[%d]", key, j), "%q is not webhook, poll or both", s)
		}
	}
	if f.Transport.Poll() && f.PollInterval != 0 && f.PollInterval < time.Second/10 {
		v.add(key+".poll_interval", "must be at least 100ms, got %s", f.PollInterval)
	}
}

// PollEvery is the forge's poll interval with its default applied.
func (f Forge) PollEvery() time.Duration {
	if f.PollInterval <= 0 {
		return DefaultPollInterval
	}
	return f.PollInterval
}
