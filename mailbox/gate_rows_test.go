package mailbox_test

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
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

// assignBot has alice assign the bot, and returns the mailbox after the pass.
func (b *gateBundle) assignBot() *mailbox.Mailbox {
	b.t.Helper()
	b.s.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin)
	b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true,
		Assignees: []string{forgetest.BotLogin}})
	return b.advance()
}

// block has alice add status::blocked.
func (b *gateBundle) block() {
	b.t.Helper()
	b.label("alice", append(b.s.IssueLabels(b.ref), "status::blocked")...)
	require.Equal(b.t, mailbox.StateBlocked, b.advance().State)
}

// toGateState drives the issue to s: idle (not assigned), working (the plan waits for its
// validation), blocked (alice added status::blocked).
func (b *gateBundle) toGateState(s gate.State) {
	b.t.Helper()
	if s == gate.Idle {
		return
	}
	require.Equal(b.t, mailbox.StateWaitingValidation, b.assignBot().State)
	if s == gate.Blocked {
		b.block()
	}
}

// toTypeState drives an issue without a type label to s: idle (not assigned), working (the
// type question is open), blocked (alice blocked it while the question was open).
func (b *gateBundle) toTypeState(s gate.State) {
	b.t.Helper()
	b.s.SetIssueLabels(b.ref, "alice")
	if s == gate.Idle {
		return
	}
	require.Equal(b.t, mailbox.StateWaitingType, b.assignBot().State, b.comments())
	if s == gate.Blocked {
		b.block()
	}
}

// toMRState drives the issue to s with Alfred's merge request open and green: working (in
// review), blocked (alice blocked it in review), idle (alice unassigned the bot in review:
// cancelled). It returns the merge request's number.
func (b *gateBundle) toMRState(s gate.State) int64 {
	b.t.Helper()
	require.Equal(b.t, mailbox.StateWaitingValidation, b.assignBot().State)
	b.label("alice", append(b.s.IssueLabels(b.ref), "ai::validate_plan")...)
	mb := b.advance()
	require.Equal(b.t, mailbox.StateInCI, mb.State, b.comments())
	b.s.SetCI(repo, mb.HeadSHA, forgetest.CIJob{Name: "test", State: forge.CISuccess})
	mb = b.poll()
	require.Equal(b.t, mailbox.StateInReview, mb.State)
	switch s {
	case gate.Blocked:
		b.block()
	case gate.Idle:
		b.s.SetIssueAssignees(b.ref, "alice")
		b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true, Assignees: []string{}})
		require.Equal(b.t, mailbox.StateCancelled, b.advance().State)
	}
	return mb.MRNumber
}

// gateRow is one row of spec/authorization.md's table (a kind in a state) as the test drives
// it, in a variant: the label alone or combined with another steering or state label, the
// sender the issue's author, or a need configured other than the default.
type gateRow struct {
	kind    gate.Kind
	state   gate.State
	variant string
	// needs is the machine's permissions (nil: the defaults).
	needs gate.Needs
	// author: the sender wrote the issue.
	author bool
}

// The variants of gateRow.
const (
	alone          = "alone"
	withSteerLabel = "with another steering label"
	withStateLabel = "with a state label"
	byAuthor       = "by the author"
	unassignWrite  = "permissions.unassign: write"
)

// gateRows lists what TestGateRowsOnStandIns drives: every row of the table, alone, and the
// variants the table's rules name.
func gateRows() []gateRow {
	var rows []gateRow
	for _, k := range gate.Kinds() {
		for _, s := range gate.States() {
			rows = append(rows, gateRow{kind: k, state: s, variant: alone})
			switch k {
			case gate.SteerLabel:
				rows = append(rows, gateRow{kind: k, state: s, variant: withSteerLabel}, gateRow{kind: k, state: s, variant: withStateLabel})
			case gate.StateLabel, gate.Answer:
				rows = append(rows, gateRow{kind: k, state: s, variant: byAuthor, author: true})
			case gate.Unassign:
				rows = append(rows, gateRow{kind: k, state: s, variant: unassignWrite, needs: gate.Needs{gate.Unassign: forge.RoleWrite}})
			}
		}
	}
	return rows
}

var specRowRE = regexp.MustCompile("^\\| `([a-z_]+)` \\| ([a-z]+) \\| ([a-z]+) \\| ([a-z]+) \\| ([a-z]+) \\|$")

// specRows reads the rows (kind × state) of the table in spec/authorization.md.
func specRows(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("../spec/authorization.md")
	require.NoError(t, err)
	defer f.Close()
	rows := map[string]bool{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
			continue
		}
		if m := specRowRE.FindStringSubmatch(line); m != nil && section == "The table" {
			for _, s := range gate.States() {
				rows[m[1]+"/"+string(s)] = true
			}
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rows)
	return rows
}

// judged reports whether the machine consults the gate for a row: where the state table does
// not take an input at all (a comment in idle, a retry while working, the bot assigned while
// it works, the bot unassigned while idle, a review on a closed mailbox, an approval, which
// only the merge gate reads), nothing reaches the gate, nothing is counted, and the outcome is
// the state table's "recorded".
func judged(r gateRow) bool {
	switch r.kind {
	case gate.SteerLabel, gate.StateLabel:
		return true
	case gate.Answer:
		return r.state == gate.Working
	case gate.Command:
		return r.state == gate.Blocked
	case gate.Assign:
		return r.state == gate.Idle
	case gate.Unassign, gate.Review:
		return r.state != gate.Idle
	}
	return false
}

// Every row of the gate's table (spec/authorization.md) is driven on both stand-ins, through
// the real clients, for every role either forge reports, with the variants its rules name: the
// outcome is the one gate.Decide gives, as the machine shows it (the state, the labels, the
// assignees, the merge), with one refusal comment per person and issue however often they
// try (per round for answers, per block for commands, per merge request for reviews), the
// outcome in the timeline, and the refusal counted. A row added to the table without a case here fails.
func TestGateRowsOnStandIns(t *testing.T) {
	t.Parallel()
	rows := gateRows()
	driven := map[string]bool{}
	for _, r := range rows {
		driven[string(r.kind)+"/"+string(r.state)] = true
	}
	require.Equal(t, specRows(t), driven, "every row of spec/authorization.md's table is driven")
	for _, kind := range []forge.Kind{forge.KindGitLab, forge.KindForgejo} {
		for _, role := range []forge.Role{forge.RoleNone, forge.RoleRead, forge.RoleTriage, forge.RoleWrite, forge.RoleAdmin} {
			if kind == forge.KindForgejo && role == forge.RoleNone {
				continue // a public repository: every account reads
			}
			for _, r := range rows {
				name := fmt.Sprintf("%s/%s/%s/%s/%s", kind, r.kind, r.state, role, r.variant)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					driveGateRow(t, kind, role, r)
				})
			}
		}
	}
}

func driveGateRow(t *testing.T, kind forge.Kind, role forge.Role, r gateRow) {
	var counted []string
	b := setupGate(t, kind, func(c *mailbox.Config) {
		c.Needs = r.needs
		c.ReviewFixAttempts = 1
		c.AutoMerge = true
		c.Refused = func(k, reason string) { counted = append(counted, k+" "+reason) }
	})
	who := b.roleUser(role)
	needs := r.needs
	if needs == nil {
		needs = gate.DefaultNeeds()
	}
	want := gate.Decide(needs, gate.Input{Kind: r.kind, State: r.state, Role: role, Author: r.author})
	if r.author {
		b.ref.Number = b.s.AddIssue(repo, forgetest.SeedIssue{Title: "Export the monthly report as CSV",
			Body: "We need a CSV export.", Author: who})
	}
	refusals := func() int { return strings.Count(b.comments(), "@"+who+", only") }
	// timeline is the outcomes of the events the test drove (after the state was reached).
	driveFrom := 0
	timeline := func() string {
		mb, err := b.store.Find(t.Context(), b.ref)
		require.NoError(t, err)
		out := b.store.Outcomes(mb.ID)
		require.Greater(t, len(out), driveFrom)
		return strings.Join(out[driveFrom:], "\n")
	}
	// now returns the state reached, and marks where the driven events begin.
	now := func() mailbox.State {
		mb, err := b.store.Find(t.Context(), b.ref)
		if err != nil {
			return mailbox.StateIdle // no event yet: idle
		}
		driveFrom = len(b.store.Outcomes(mb.ID))
		return mb.State
	}
	var before mailbox.State
	switch r.kind {
	case gate.SteerLabel:
		b.toGateState(r.state)
		before = now()
		second := map[string]string{alone: "", withSteerLabel: "ai::retry_until_green", withStateLabel: "type::bug"}[r.variant]
		for range 2 { // twice: still one refusal
			labels := append(b.s.IssueLabels(b.ref), "ai::auto_merge")
			if second != "" {
				labels = append(labels, second)
			}
			b.label(who, labels...)
			b.advance()
		}
		labels := b.s.IssueLabels(b.ref)
		require.Equal(t, want == gate.Allowed, slices.Contains(labels, "ai::auto_merge"), "the label stays only when allowed")
		switch second {
		case "ai::retry_until_green":
			require.Equal(t, want == gate.Allowed, slices.Contains(labels, second))
		case "type::bug":
			require.Contains(t, labels, second, "a state label is never undone")
			stateWant := gate.Decide(needs, gate.Input{Kind: gate.StateLabel, State: r.state, Role: role})
			require.Equal(t, stateWant == gate.Ignored, strings.Contains(timeline(), "ignored for @"+who), timeline())
		}
	case gate.StateLabel:
		b.toTypeState(r.state)
		before = now()
		b.label(who, append(b.s.IssueLabels(b.ref), "type::bug")...)
		mb := b.advance()
		require.Contains(t, b.s.IssueLabels(b.ref), "type::bug", "a state label is never undone")
		require.Equal(t, want == gate.Ignored, strings.Contains(timeline(), "ignored for @"+who), timeline())
		switch r.state {
		case gate.Working:
			require.Equal(t, want == gate.Allowed, mb.Type == "bug", "the type is taken only when allowed")
			require.Equal(t, want == gate.Allowed, mb.State != mailbox.StateWaitingType, "the type question stays open")
		case gate.Idle:
			// Assigned afterwards: a type label the gate did not take leaves the question open.
			mb = b.assignBot()
			require.Equal(t, want == gate.Allowed, mb.State != mailbox.StateWaitingType, "the type question stays open: %s", b.comments())
		default:
			require.Equal(t, mailbox.StateBlocked, mb.State)
		}
	case gate.Answer:
		b.toTypeState(r.state)
		before = now()
		for range 2 { // twice in one round: still one refusal
			b.deliver(comment(who, "q1: bug"))
			b.advance()
		}
		mb := b.advance()
		if r.state == gate.Working {
			require.Equal(t, want == gate.Allowed, mb.Type == "bug", "answered only when allowed")
		} else {
			require.Equal(t, before, mb.State, "a comment the state does not take changes nothing")
		}
	case gate.Command:
		b.toGateState(r.state)
		before = now()
		for range 2 { // twice in one block: still one refusal
			b.deliver(comment(who, "retry"))
			b.advance()
		}
		mb := b.advance()
		if r.state == gate.Blocked {
			require.Equal(t, want == gate.Allowed, mb.State != mailbox.StateBlocked, "resumed only when allowed")
		} else {
			require.Equal(t, before, mb.State, "a retry the state does not take changes nothing")
		}
	case gate.Assign:
		b.toGateState(r.state)
		before = now()
		for range 2 { // twice: still one refusal
			b.s.SetIssueAssignees(b.ref, who, who, forgetest.BotLogin)
			b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: who}, AssigneesKnown: true,
				PreviousAssignees: []string{}, Assignees: []string{who, forgetest.BotLogin}})
			b.advance()
		}
		mb := b.advance()
		if r.state == gate.Idle {
			require.Equal(t, want == gate.Allowed, mb.State != mailbox.StateIdle, "started only when allowed")
		} else {
			require.Equal(t, before, mb.State, "already working")
		}
	case gate.Unassign:
		if r.state == gate.Idle {
			// Done: the issue closed while the bot was still assigned.
			b.toGateState(gate.Working)
			b.deliver(forge.Event{Type: forge.EventIssueClosed, Sender: forge.User{Login: "alice"}})
			require.False(t, b.advance().State.Working())
		} else {
			b.toGateState(r.state)
		}
		before = now()
		for range 2 { // twice: still one refusal
			b.s.SetIssueAssignees(b.ref, who)
			b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: who}, AssigneesKnown: true,
				Assignees: []string{}})
			b.advance()
		}
		mb := b.advance()
		switch {
		case r.state == gate.Idle:
			require.Equal(t, before, mb.State)
		case want == gate.Allowed:
			require.Equal(t, mailbox.StateCancelled, mb.State, "cancelled")
		default:
			require.Equal(t, before, mb.State, "the work goes on")
			require.Contains(t, b.s.IssueAssignees(b.ref), forgetest.BotLogin, "the bot assigned itself again")
		}
	case gate.Review:
		mr := b.toMRState(r.state)
		before = now()
		for range 2 { // twice: still one refusal
			b.deliver(forge.Event{Type: forge.EventReview, Target: forge.IssueRef{Forge: "f", Repo: repo, Number: mr, MergeRequest: true},
				Sender: forge.User{Login: who}, Review: &forge.Review{State: "changes_requested", Body: "Rename it."}})
			b.advance()
		}
		mb := b.advance()
		require.Equal(t, before, mb.State)
		require.Equal(t, want == gate.Allowed && r.state != gate.Idle, !mb.Data.ReviewDue.IsZero(), "a review_fix is due only when allowed, and only while working")
	case gate.Approval:
		mr := b.toMRState(r.state)
		before = now()
		b.s.AddReview(repo, mr, who, "approved", "")
		b.deliver(forge.Event{Type: forge.EventReview, Target: forge.IssueRef{Forge: "f", Repo: repo, Number: mr, MergeRequest: true},
			Sender: forge.User{Login: who}, Review: &forge.Review{State: "approved"}})
		b.advance()
		mb := b.poll()
		merged := b.s.MergedWith(repo, mr) != ""
		require.Equal(t, want == gate.Allowed && r.state == gate.Working, merged, "an approval counts only when allowed, and only in review")
		if !merged {
			require.Equal(t, before, mb.State)
		}
	default:
		t.Fatalf("no driven case for the kind %s: add one", r.kind)
	}
	if want == gate.Refused {
		require.Equal(t, 1, refusals(), "one refusal per person: %s", b.comments())
		require.Contains(t, timeline(), "refused", "the timeline says so")
	} else {
		require.Zero(t, refusals(), b.comments())
	}
	reason := string(r.kind) + " " + gate.Reason(needs, r.kind)
	if want != gate.Allowed && judged(r) {
		require.Contains(t, counted, reason, "counted in alfred_refused_inputs_total")
	} else if r.variant != withStateLabel {
		require.NotContains(t, counted, reason)
	}
}
