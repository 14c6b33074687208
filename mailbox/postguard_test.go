package mailbox_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestSplitCommentAtRuneBoundaries(t *testing.T) {
	text := strings.Repeat("é日本語😀 line\n", 400)
	body := mailbox.Marker("plan-1", "plan") + "\n" + text
	parts := mailbox.SplitComment(body, 1500)
	require.Greater(t, len(parts), 3)
	var joined strings.Builder
	for i, p := range parts {
		require.LessOrEqual(t, len(p), 1500, "part %d", i+1)
		require.True(t, utf8.ValidString(p), "part %d cut inside a rune", i+1)
		key, kind, ok := mailbox.ParseMarker(p)
		require.True(t, ok)
		require.Equal(t, "plan", kind)
		want := "plan-1"
		if i > 0 {
			want = fmt.Sprintf("plan-1.part-%d", i+1)
		}
		require.Equal(t, want, key)
		_, rest, _ := strings.Cut(p, "\n")
		notice := fmt.Sprintf("*(part %d of %d)*\n\n", i+1, len(parts))
		require.True(t, strings.HasPrefix(rest, notice))
		joined.WriteString(strings.TrimPrefix(rest, notice))
	}
	require.Equal(t, text, joined.String(), "the parts hold the whole text, in order")
	require.Equal(t, []string{body}, mailbox.SplitComment(body, len(body)), "a comment that fits is one part")
}

func TestCutDescriptionKeepsSectionEnds(t *testing.T) {
	body := mailbox.SetSection("The human's text.", "alfred-functional", strings.Repeat("ü analysis ", 3000))
	out := mailbox.CutDescription(body, 4096)
	require.LessOrEqual(t, len(out), 4096)
	require.True(t, utf8.ValidString(out))
	require.Contains(t, out, "Cut here")
	got, ok := mailbox.Section(out, "alfred-functional")
	require.True(t, ok, "the cut section still reads")
	require.True(t, strings.HasPrefix(got, "ü analysis"))
	require.Equal(t, body, mailbox.CutDescription(body, len(body)))
}

// A plan longer than the forge's comment limit is posted in marked parts; posting it again
// (a retried pass) edits the same parts in place; a secret in the agent's plan never reaches
// the forge.
func TestLongPlanPostedInPartsAndCensored(t *testing.T) {
	t.Parallel()
	const secret = "glpat-s3cretTOKENvalue"
	c := censor.New(censor.Config{Secrets: []string{secret, "pw1"}})
	b := setupWith(t, guard{limits: &mailbox.PostLimits{MaxCommentBytes: 2048, MaxDescriptionBytes: 4096}, redact: c.String},
		"type::task")
	b.exec.results["analysis.functional"].Questions = nil
	var plan strings.Builder
	for i := range 120 {
		fmt.Fprintf(&plan, "%d. Step %d of the plan: change the exporter, then the button (ünïcödé).\n", i+1, i+1)
	}
	plan.WriteString("Use the token " + secret + " and the password pw1 to deploy.\n")
	b.exec.results["analysis.technical"].Plan = plan.String()

	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	var parts []string
	for _, body := range b.comments() {
		require.LessOrEqual(t, len(body), 2048, "every comment within the limit")
		require.NotContains(t, body, secret, "the secret in the agent's plan is censored")
		require.NotContains(t, body, " pw1 ", "a short secret as a whole token is censored")
		if k, _, ok := mailbox.ParseMarker(body); ok && strings.HasPrefix(k, "plan-") {
			parts = append(parts, body)
		}
	}
	require.Greater(t, len(parts), 2, "the plan went out in parts")
	require.Contains(t, parts[0], fmt.Sprintf("*(part 1 of %d)*", len(parts)))
	require.Contains(t, parts[len(parts)-1], "[redacted]")
	require.LessOrEqual(t, len(b.fake.IssueBody(b.ref)), 4096, "the description within its limit")
	before := len(b.comments())

	// The same comment posted again edits the parts, it adds none.
	ref := b.ref
	first := b.fake.IssueComments(ref)
	var planID int64
	for _, cm := range first {
		if k, _, _ := mailbox.ParseMarker(cm.Body); strings.HasPrefix(k, "plan-") && !strings.Contains(k, ".part-") {
			planID = cm.ID
		}
	}
	require.NotZero(t, planID)
	g := mailbox.GuardPosts(b.fake, mailbox.PostGuard{Censor: c.String, Limits: mailbox.PostLimits{MaxCommentBytes: 2048, MaxDescriptionBytes: 4096}})
	key, kind, _ := mailbox.ParseMarker(parts[0])
	require.NoError(t, g.EditComment(t.Context(), ref, planID, mailbox.Marker(key, kind)+"\n"+plan.String()))
	require.Len(t, b.comments(), before, "no part posted twice")
	// A shorter version leaves the extra parts marked as unused.
	require.NoError(t, g.EditComment(t.Context(), ref, planID, mailbox.Marker(key, kind)+"\nShort plan now."))
	require.Len(t, b.comments(), before)
	require.Contains(t, strings.Join(b.comments(), "\n"), "This part is no longer used.")
}

// A post the forge refuses with a 4xx is not retried: the mailbox blocks with the reason.
func TestRefusedPostBlocks(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{limits: &mailbox.PostLimits{}, redact: func(s string) string { return s }}, "type::task")
	b.exec.results["analysis.functional"].Questions = nil
	// The functional analysis goes into the description, while the mailbox works.
	// (A 400 there is taken as "too long": the section goes into a comment, see
	// TestHostileForgeRefusesTheLongDescription.)
	b.fake.FailNextCall("SetIssueBody", fmt.Errorf("gitlab: edit issue: %w: HTTP 403: not allowed to edit the description", forge.ErrForbidden))
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Equal(t, []string{"status::blocked"}, b.status())
	require.Contains(t, mb.Data.Blocked, "not allowed to edit the description")
	require.Contains(t, b.lastComment(), "I am blocked: the forge refused what I tried to post")
}

// A refused post outside a working state (the acknowledgement, before the mailbox starts) is
// recorded and not retried.
func TestRefusedPostWhileIdleIsRecorded(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{limits: &mailbox.PostLimits{}, redact: func(s string) string { return s }}, "type::task")
	b.fake.FailNextCall("Comment", fmt.Errorf("gitlab: post note: %w: HTTP 400", forge.ErrRefused))
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateIdle, mb.State)
	pending, err := b.store.PendingEvents(t.Context(), mb.ID)
	require.NoError(t, err)
	require.Empty(t, pending, "the event is recorded, not retried")
}

// Alfred never @-mentions a bot: the mention is written as code, which notifies nobody.
func TestBotMentionsAreQuoted(t *testing.T) {
	t.Parallel()
	fake := forgetest.NewFake(forge.KindForgejo)
	fake.AddUser("alice")
	fake.AddRepo(repo, "main", "/nonexistent.git")
	n := fake.AddIssue(repo, forgetest.SeedIssue{Title: "x", Author: "alice"})
	ref := forge.IssueRef{Forge: "fj", Repo: repo, Number: n}
	g := mailbox.GuardPosts(fake, mailbox.PostGuard{IsBot: func(l string) bool { return l == "helper" || forge.IsBotLogin(forge.KindForgejo, 0, l) }})
	_, err := g.Comment(t.Context(), ref, "Thanks @renovate[bot], @ci-bot, @helper and @alice; mail me at a@b.org. `@ci-bot` stays.")
	require.NoError(t, err)
	got := fake.IssueComments(ref)
	require.Len(t, got, 1)
	require.Equal(t, "Thanks `@renovate[bot]`, `@ci-bot`, `@helper` and @alice; mail me at a@b.org. `@ci-bot` stays.", got[0].Body)
}

// On GitLab, a line of a posted text that GitLab would run as a quick action (as the bot, with
// its rights: "/merge", "/approve", "/label ~ai::auto_merge") gets a space before it, whoever
// wrote it, in a code block too and with carriage returns anywhere on the line (GitLab deletes
// them first); a "/" not at a line's start and a title are left as they are, and the text is
// otherwise kept byte for byte. A part of a split comment and a cut description are escaped
// again. Forgejo has no quick actions: its texts are left as they are.
func TestQuickActionsAreEscapedOnGitLab(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, gitlab string }{
		{"ok\n/merge", "ok\n /merge"},
		{"/approve", " /approve"},
		{"Done.\r\n/label ~ai::auto_merge\r\nThanks", "Done.\r\n /label ~ai::auto_merge\r\nThanks"},
		{"x\n\r/unassign @bot", "x\n \r/unassign @bot"},
		{"x\n/\rmerge", "x\n /\rmerge"},
		{"```sh\n/usr/bin/env true\n```\n/close", "```sh\n /usr/bin/env true\n```\n /close"},
		{"<div>\n```\n</div>\n/merge\n```", "<div>\n```\n</div>\n /merge\n```"},
		{"see /merge and a/b\n /merge indented\n/ alone\n/1", "see /merge and a/b\n /merge indented\n/ alone\n/1"},
	}
	for _, kind := range []forge.Kind{forge.KindGitLab, forge.KindForgejo} {
		fake := forgetest.NewFake(kind)
		fake.AddUser("alice")
		fake.AddRepo(repo, "main", "/nonexistent.git")
		n := fake.AddIssue(repo, forgetest.SeedIssue{Title: "x", Author: "alice"})
		ref := forge.IssueRef{Forge: "f", Repo: repo, Number: n}
		g := mailbox.GuardPosts(fake, mailbox.PostGuard{Limits: mailbox.PostLimits{MaxCommentBytes: 2048, MaxDescriptionBytes: 2048}})
		for i, c := range cases {
			want := c.in
			if kind == forge.KindGitLab {
				want = c.gitlab
			}
			id, err := g.Comment(t.Context(), ref, c.in)
			require.NoError(t, err)
			got := fake.IssueComments(ref)
			require.Equal(t, want, got[len(got)-1].Body, "%s comment %d", kind, i)
			require.NoError(t, g.EditComment(t.Context(), ref, id, "edited\n"+c.in))
			got = fake.IssueComments(ref)
			require.Equal(t, "edited\n"+want, got[len(got)-1].Body, "%s edit %d", kind, i)
		}
		mr, err := g.CreateMergeRequest(t.Context(), repo, forge.NewMergeRequest{Title: "/merge the export", Body: "Closes #1\n/merge",
			SourceBranch: "alfred/1", TargetBranch: "main"})
		require.NoError(t, err)
		require.Equal(t, "/merge the export", mr.Title, "%s: a title runs no quick action", kind)
		if kind == forge.KindGitLab {
			require.Equal(t, "Closes #1\n /merge", mr.Body)
		} else {
			require.Equal(t, "Closes #1\n/merge", mr.Body)
		}

		// A comment split inside a long line of "/a/a/a…": with one padding or the other, a
		// part starts at a "/a", a new line start the whole text did not have.
		started := false
		for pad := range 2 {
			long := mailbox.Marker(fmt.Sprintf("plan-%d", pad), "plan") + "\n" + strings.Repeat("x", pad) + strings.Repeat("/a", 3000)
			_, err = g.Comment(t.Context(), ref, long)
			require.NoError(t, err)
		}
		for _, c := range fake.IssueComments(ref) {
			for _, line := range strings.Split(c.Body, "\n") {
				started = started || strings.HasPrefix(line, "/a") || strings.HasPrefix(line, " /a")
				if kind == forge.KindGitLab {
					require.False(t, strings.HasPrefix(line, "/a"), "a part's line reads as a quick action: %.40q", line)
				}
			}
		}
		require.True(t, started, "%s: no part starts at a /a", kind)
	}
}

// What Alfred records of a comment it posts on GitLab is what the forge holds, escaped: a
// question whose context starts a line with "/api/…" is still Alfred's own text when the
// reconciliation compares it (PostedComment.Wrote), not a human's edit of the block.
func TestPostedCommentOnGitLabIsRecordedAsSent(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{limits: &mailbox.PostLimits{}}, "type::task")
	b.exec.results["analysis.functional"].Questions[0].Context = "/api/export is what the button calls.\n/label ~ai::auto_merge"
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	n := 0
	for _, c := range b.fake.IssueComments(b.ref) {
		key, _, ok := mailbox.ParseMarker(c.Body)
		if !ok {
			continue
		}
		pc, err := b.store.PostedComment(t.Context(), mb.ID, key)
		require.NoError(t, err)
		require.NotNil(t, pc, key)
		require.True(t, pc.Wrote(c.Body), "%s: the forge's body is the one recorded", key)
		if strings.Contains(c.Body, " /api/export") {
			n++
		}
	}
	require.Equal(t, 1, n, "the question block, escaped")
}
