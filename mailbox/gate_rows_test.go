package mailbox_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// roleUser seeds an account with role on the stand-in and returns its login: GitLab access
// levels (none: no membership); Forgejo/Gitea collaborators, a triage team, and for read an
// account without membership (everyone reads a public repository).
func (b *gateBundle) roleUser(role forge.Role) string {
	login := "u-" + role.String()
	b.s.AddUser(login)
	switch {
	case role == forge.RoleTriage && b.kind == forge.KindForgejo:
		b.s.AddTeam(repo, "triage", map[string]string{"repo.issues": "write", "repo.code": "read"}, login)
	case b.kind == forge.KindGitLab && role > forge.RoleNone:
		b.s.SetAccessLevel(repo, login, map[forge.Role]int{forge.RoleRead: 10, forge.RoleTriage: 20, forge.RoleWrite: 30, forge.RoleAdmin: 40}[role])
	case role >= forge.RoleWrite:
		b.s.SetAccessLevel(repo, login, map[forge.Role]int{forge.RoleWrite: 30, forge.RoleAdmin: 40}[role])
	}
	return login
}

// toGateState drives the issue to s: idle (not assigned), working (the plan waits for its
// validation), blocked (alice added status::blocked).
func (b *gateBundle) toGateState(s gate.State) {
	b.t.Helper()
	if s == gate.Idle {
		return
	}
	b.s.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin)
	b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true,
		Assignees: []string{forgetest.BotLogin}})
	require.Equal(b.t, mailbox.StateWaitingValidation, b.advance().State)
	if s == gate.Blocked {
		b.label("alice", append(b.s.IssueLabels(b.ref), "status::blocked")...)
		require.Equal(b.t, mailbox.StateBlocked, b.advance().State)
	}
}

// Every row of the gate's table that a forge input reaches through a label, an assignment or
// a command is driven on both stand-ins, for every role either forge reports, with the label
// alone and combined with another: the outcome is the one gate.Decide gives.
func TestGateRowsOnStandIns(t *testing.T) {
	t.Parallel()
	type row struct {
		kind     gate.Kind
		state    gate.State
		combined bool
	}
	var rows []row
	for _, s := range gate.States() {
		rows = append(rows, row{gate.SteerLabel, s, false}, row{gate.SteerLabel, s, true})
	}
	rows = append(rows, row{gate.Assign, gate.Idle, false}, row{gate.Command, gate.Blocked, false})
	for _, kind := range []forge.Kind{forge.KindGitLab, forge.KindForgejo} {
		for _, role := range []forge.Role{forge.RoleNone, forge.RoleRead, forge.RoleTriage, forge.RoleWrite, forge.RoleAdmin} {
			if kind == forge.KindForgejo && role == forge.RoleNone {
				continue // a public repository: every account reads
			}
			for _, r := range rows {
				name := fmt.Sprintf("%s/%s/%s/%s/combined=%v", kind, r.kind, r.state, role, r.combined)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					b := setupGate(t, kind)
					who := b.roleUser(role)
					b.toGateState(r.state)
					want := gate.Decide(gate.DefaultNeeds(), gate.Input{Kind: r.kind, State: r.state, Role: role})
					before := strings.Count(b.comments(), "@"+who+", only")
					switch r.kind {
					case gate.SteerLabel:
						labels := append(b.s.IssueLabels(b.ref), "ai::auto_merge")
						if r.combined {
							labels = append(labels, "ai::retry_until_green")
						}
						b.label(who, labels...)
						b.advance()
						has := slices.Contains(b.s.IssueLabels(b.ref), "ai::auto_merge")
						require.Equal(t, want == gate.Allowed, has, "the label stays only when allowed")
						if r.combined {
							require.Equal(t, want == gate.Allowed, slices.Contains(b.s.IssueLabels(b.ref), "ai::retry_until_green"))
						}
					case gate.Assign:
						b.s.SetIssueAssignees(b.ref, who, forgetest.BotLogin)
						b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: who}, AssigneesKnown: true,
							Assignees: []string{forgetest.BotLogin}})
						mb := b.advance()
						require.Equal(t, want == gate.Allowed, mb.State != mailbox.StateIdle, "started only when allowed")
					case gate.Command:
						b.deliver(comment(who, "retry"))
						mb := b.advance()
						require.Equal(t, want == gate.Allowed, mb.State != mailbox.StateBlocked, "resumed only when allowed")
					}
					refusals := strings.Count(b.comments(), "@"+who+", only") - before
					if want == gate.Refused {
						require.Equal(t, 1, refusals, "one refusal")
					} else {
						require.Zero(t, refusals)
					}
				})
			}
		}
	}
}
