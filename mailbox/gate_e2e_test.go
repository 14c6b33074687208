package mailbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// standIn is what the gate's end-to-end tests seed and read on an httptest stand-in: the
// model both GitLabServer and ForgejoServer share.
type standIn interface {
	AddUser(login string) forge.User
	AddRepo(repo, defaultBranch, cloneURL string)
	SetAccessLevel(repo, login string, level int)
	AddTeam(repo, name string, units map[string]string, members ...string)
	AddIssue(repo string, si forgetest.SeedIssue) int64
	IssueLabels(ref forge.IssueRef) []string
	IssueComments(ref forge.IssueRef) []forge.Comment
	SetIssueLabels(ref forge.IssueRef, actor string, labels ...string)
	SetIssueAssignees(ref forge.IssueRef, actor string, logins ...string)
	IssueAssignees(ref forge.IssueRef) []string
	SetBranch(repo, branch, sha string)
	SetCI(repo, sha string, jobs ...forgetest.CIJob)
	AddReview(repo string, number int64, login, state, body string, comments ...forgetest.SeedReviewComment) []int64
	MergedWith(repo string, number int64) string
	SetRequiredApprovals(repo, branch string, n int)
	SetClock(t time.Time)
}

// gateBundle drives a machine whose forge is the real HTTP client against a stand-in.
type gateBundle struct {
	t       *testing.T
	s       standIn
	kind    forge.Kind
	store   *mailboxtest.Store
	machine *mailbox.Machine
	clock   *clock
	ref     forge.IssueRef
	seq     int
}

// setupGate seeds, on the stand-in of kind, acme/shop with alice (write), bob (write, the
// reviewer) and mallory (GitLab Reporter; on Forgejo/Gitea a member of a triage team: both may
// label, neither may push), merges into main needing no approval from the forge, and an issue
// by alice.
// Each of opts may change the machine's configuration.
func setupGate(t *testing.T, kind forge.Kind, opts ...func(*mailbox.Config)) *gateBundle {
	t.Helper()
	var s standIn
	var f forge.Forge
	retry := func() (int, time.Duration, time.Duration) { return 3, time.Millisecond, 20 * time.Millisecond }
	n, lo, hi := retry()
	if kind == forge.KindGitLab {
		srv := forgetest.NewGitLabServer(t)
		c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: srv.URL, Token: srv.Token, MaxRetries: n, RetryWaitMin: lo, RetryWaitMax: hi})
		require.NoError(t, err)
		s, f = srv, c
	} else {
		srv := forgetest.NewForgejoServer(t)
		c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: srv.URL, Token: srv.Token, MaxRetries: n, RetryWaitMin: lo, RetryWaitMax: hi})
		require.NoError(t, err)
		s, f = srv, c
	}
	s.AddRepo(repo, "main", "/nonexistent.git")
	s.SetAccessLevel(repo, "alice", 30)
	s.SetAccessLevel(repo, "bob", 30)
	if kind == forge.KindGitLab {
		s.SetAccessLevel(repo, "mallory", 20) // Reporter
	} else {
		s.AddTeam(repo, "triage", map[string]string{"repo.issues": "write", "repo.code": "read"}, "mallory")
	}
	s.SetRequiredApprovals(repo, "main", 0)
	num := s.AddIssue(repo, forgetest.SeedIssue{Title: "Export the monthly report as CSV", Body: "We need a CSV export.",
		Author: "alice", Labels: []string{"type::task"}})
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := mailboxtest.NewStore(c.Now)
	exec := &scriptedJobs{fake: s, results: map[string]*phase.Result{
		"analysis.functional": {Summary: "understood", Understanding: "You want a CSV export."},
		"analysis.technical":  {Summary: "planned", Plan: "1. Add an export endpoint."},
		"development":         {Summary: "Added the CSV export.", CommitMessage: "Add CSV export"},
	}, failures: map[string]string{}}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, PermissionTTL: time.Minute}
	for _, o := range opts {
		o(&cfg)
	}
	m := mailbox.NewMachine(cfg, store, map[string]mailbox.Bot{"f": {Forge: f, Login: forgetest.BotLogin}}, exec, c.Now, log)
	return &gateBundle{t: t, s: s, kind: kind, store: store, machine: m, clock: c,
		ref: forge.IssueRef{Forge: "f", Repo: repo, Number: num}}
}

func (b *gateBundle) deliver(ev forge.Event) {
	b.t.Helper()
	b.seq++
	ev.Forge, ev.Kind = "f", b.kind
	ev.DeliveryID, ev.BodyHash = fmt.Sprintf("d-%d", b.seq), fmt.Sprintf("h-%d", b.seq)
	if ev.Target.Repo == "" {
		ev.Target = b.ref
	}
	ev.ReceivedAt = b.clock.Now()
	_, err := b.store.Deliver(context.Background(), ev)
	require.NoError(b.t, err)
}

// label sets labels on the forge as by would, and delivers the webhook of the change as the
// forge's parser gives it: GitLab's with the previous labels, Forgejo's with the whole list only.
func (b *gateBundle) label(by string, labels ...string) {
	b.t.Helper()
	prev := b.s.IssueLabels(b.ref)
	b.s.SetIssueLabels(b.ref, by, labels...)
	if b.kind == forge.KindForgejo {
		prev = nil
	}
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: by}, LabelsKnown: true,
		PreviousLabels: prev, Labels: b.s.IssueLabels(b.ref)})
}

func (b *gateBundle) advance() *mailbox.Mailbox {
	b.t.Helper()
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	require.NoError(b.t, b.machine.Advance(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	return mb
}

func (b *gateBundle) poll() *mailbox.Mailbox {
	b.clock.Add(time.Minute)
	return b.advance()
}

func (b *gateBundle) comments() string {
	var out []string
	for _, c := range b.s.IssueComments(b.ref) {
		out = append(out, c.Body)
	}
	return strings.Join(out, "\n---\n")
}

// A non-writer's ai::auto_merge never leads to a merge, alone, combined with other labels,
// or set before the bot is assigned; an approval followed by a push is not enough; an enabler
// who lost write access does not merge. On both forges' stand-ins, through the real clients.
func TestGateAutoMergeOnStandIns(t *testing.T) {
	t.Parallel()
	for _, kind := range []forge.Kind{forge.KindGitLab, forge.KindForgejo} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			b := setupGate(t, kind)
			// Before the bot is assigned, combined with another steering label: both undone,
			// one refusal.
			b.label("mallory", "type::task", "ai::auto_merge", "ai::validate_plan")
			b.advance()
			require.NotContains(t, b.s.IssueLabels(b.ref), "ai::auto_merge")
			require.NotContains(t, b.s.IssueLabels(b.ref), "ai::validate_plan")
			require.Equal(t, 1, strings.Count(b.comments(), "@mallory, only a project member with write access can turn auto-merge on or validate the plan"))
			// Again, without a webhook (a missed delivery): only the label history tells who.
			b.s.SetIssueLabels(b.ref, "mallory", "type::task", "ai::auto_merge")

			b.s.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin)
			b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true,
				Assignees: []string{forgetest.BotLogin}})
			mb := b.advance()
			require.Equal(t, mailbox.StateWaitingValidation, mb.State, b.comments())
			// mallory's validation alone is refused again, said once per person and issue.
			b.label("mallory", append(b.s.IssueLabels(b.ref), "ai::validate_plan")...)
			mb = b.advance()
			require.Equal(t, mailbox.StateWaitingValidation, mb.State)
			require.Equal(t, 1, strings.Count(b.comments(), "@mallory, only"), "one refusal per person and issue")
			b.label("alice", append(b.s.IssueLabels(b.ref), "ai::validate_plan")...)
			mb = b.advance()
			require.Equal(t, mailbox.StateInCI, mb.State, b.comments())
			head := mb.HeadSHA
			b.s.SetCI(repo, head, forgetest.CIJob{Name: "test", State: forge.CISuccess})
			mb = b.poll()
			require.Equal(t, mailbox.StateInReview, mb.State)

			// CI green, bob approves H, no thread: mallory's label (the history says hers) merges nothing.
			b.s.AddReview(repo, mb.MRNumber, "bob", "approved", "")
			mb = b.poll()
			require.Equal(t, mailbox.StateInReview, mb.State)
			require.Empty(t, b.s.MergedWith(repo, mb.MRNumber), "a non-writer's label never merges")
			require.NotContains(t, b.s.IssueLabels(b.ref), "ai::auto_merge", "undone once seen")
			require.Equal(t, 1, strings.Count(b.comments(), "@mallory, only"), "still one refusal for mallory")

			// A push after the approval: alice's label turns auto-merge on, but bob approved H, not H2.
			h2 := "2222222222222222222222222222222222222222"
			b.s.SetBranch(repo, mb.Branch, h2)
			b.s.SetCI(repo, h2, forgetest.CIJob{Name: "test", State: forge.CISuccess})
			b.label("alice", append(b.s.IssueLabels(b.ref), "ai::auto_merge")...)
			mb = b.advance()
			mb = b.poll()
			require.Equal(t, mailbox.StateInReview, mb.State)
			require.Empty(t, b.s.MergedWith(repo, mb.MRNumber), "an approval of an earlier head is not enough")
			require.Contains(t, mb.Data.AutoMergeWaits, "an approval of 2222222")

			// alice loses write access; bob approves H2: the enabler no longer may steer.
			b.s.SetAccessLevel(repo, "alice", 20)
			b.clock.Add(2 * time.Minute) // past the permission cache
			b.s.AddReview(repo, mb.MRNumber, "bob", "approved", "")
			mb = b.poll()
			require.Equal(t, mailbox.StateInReview, mb.State)
			require.Empty(t, b.s.MergedWith(repo, mb.MRNumber), "an enabler who lost write access does not merge")
			require.Contains(t, mb.Data.AutoMergeWaits, "@alice, who added it, no longer has write access")

			// Write access back: H2 is merged, named in the call.
			b.s.SetAccessLevel(repo, "alice", 30)
			b.clock.Add(2 * time.Minute)
			mb = b.poll()
			require.Equal(t, mailbox.StateDone, mb.State, b.comments())
			require.NotEmpty(t, b.s.MergedWith(repo, mb.MRNumber))
		})
	}
}
