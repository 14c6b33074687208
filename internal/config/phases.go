package config

import "github.com/alfred-bot/alfred/runner/phase"

// Bindings maps every phase that has an agent (its own or the "default" one) to that agent's
// name; a phase with neither is absent.
func (p Phases) Bindings() map[phase.Phase]string {
	bindings := map[phase.Phase]string{}
	for _, ph := range phase.All() {
		if name := p.Agent(string(ph)); name != "" {
			bindings[ph] = name
		}
	}
	return bindings
}
