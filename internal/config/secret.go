package config

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/alfred-bot/alfred/internal/base/censor"
)

// Redacted is what a non-empty Secret renders as, whatever the formatter: the censor's marker.
const Redacted = censor.Redacted

// Secret is a string that never shows its value: fmt (every verb, %#v included), encoding/json,
// encoding (TextMarshaler), goccy/go-yaml and log/slog all render [Redacted]. An empty Secret
// renders as "" so that a dump shows which secrets are unset.
//
// Use Reveal where the value is really needed (an HTTP header, a DSN); (*Config).Censor hides a
// value that escapes anyway.
type Secret string

// Reveal returns the secret value itself. Never log or print it.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) masked() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String returns [Redacted] (or "" when the secret is empty).
func (s Secret) String() string { return s.masked() }

// GoString returns the quoted [Redacted], so %#v shows no secret either.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.masked()) }

// Format implements fmt.Formatter so that every verb, not only %s and %v, is redacted.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.masked())
}

// MarshalJSON renders the secret as the JSON string [Redacted].
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.masked()) }

// MarshalText renders the secret as [Redacted] for text encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.masked()), nil }

// MarshalYAML renders the secret as [Redacted] (goccy/go-yaml and go-yaml call it).
func (s Secret) MarshalYAML() (any, error) { return s.masked(), nil }

// LogValue renders the secret as [Redacted] in log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.masked()) }
