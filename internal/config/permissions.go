package config

import (
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Permissions says which forge role each kind of human input needs (mailbox/gate,
// spec/authorization.md): none, read, triage, write or admin. Empty keys take gate.DefaultNeeds
// (writing steers: write for steering and state labels, answers, commands, assignments, review
// requests for changes and approvals; none for unassigning, which the forge itself limits).
type Permissions struct {
	SteerLabel string `yaml:"steer_label" env:"STEER_LABEL"`
	StateLabel string `yaml:"state_label" env:"STATE_LABEL"`
	Answer     string `yaml:"answer" env:"ANSWER"`
	Command    string `yaml:"command" env:"COMMAND"`
	Assign     string `yaml:"assign" env:"ASSIGN"`
	Unassign   string `yaml:"unassign" env:"UNASSIGN"`
	Review     string `yaml:"review" env:"REVIEW"`
	Approval   string `yaml:"approval" env:"APPROVAL"`
	// Cache is how long a role read from the forge is trusted (default 1m): a person whose
	// role the forge lowers loses their power within it. Neither forge sends Alfred a
	// membership webhook it parses, so this bound is the only one.
	Cache time.Duration `yaml:"cache" env:"CACHE"`
}

func (p Permissions) named() map[gate.Kind]string {
	return map[gate.Kind]string{gate.SteerLabel: p.SteerLabel, gate.StateLabel: p.StateLabel, gate.Answer: p.Answer,
		gate.Command: p.Command, gate.Assign: p.Assign, gate.Unassign: p.Unassign, gate.Review: p.Review, gate.Approval: p.Approval}
}

// Needs returns the roles the keys name, the defaults for empty keys; an error names the first
// key whose role is unknown.
func (p Permissions) Needs() (gate.Needs, error) {
	out := gate.DefaultNeeds()
	for k, v := range p.named() {
		if v == "" {
			continue
		}
		r, err := forge.ParseRole(v)
		if err != nil {
			return nil, fmt.Errorf("permissions.%s: %w", k, err)
		}
		out[k] = r
	}
	return out, nil
}
