package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// startPollE2E wires Alfred to a stand-in of kind with transport poll (every 200ms), no
// webhook secret and no delivery ever sent; the bot account is the stand-in's token account.
// It returns the e2e with its issue set to a new issue by alice, not assigned yet.
func startPollE2E(t *testing.T, kind forge.Kind, repo string) *e2e {
	t.Helper()
	agents, _ := scriptAgents(t, reviewScript)
	e := startE2EConfig(t, storeSQLite, kind, repo, time.Hour, agents, func(c *config.Config) {
		f := &c.Forges[0]
		f.Transport, f.PollInterval = config.Transports{config.TransportPoll}, 200*time.Millisecond
		f.BotUser, f.WebhookSecret = forgetest.BotLogin, ""
	}, "ALFRED_LIFECYCLE_REVIEW_QUIET=1s")
	setClockNow(e)
	n := e.forgejo.AddIssue(repo, forgetest.SeedIssue{Title: "Export the report as CSV",
		Body: "The monthly report should be downloadable.", Author: "alice", Labels: []string{"type::task"}})
	e.issue.Number = n
	return e
}

// With transport poll and no webhook at all, the whole lifecycle runs on both forges: alice
// assigns the bot, validates the plan, CI passes, she requests a change in review (fixed on the
// branch), CI passes again and she merges. Every change reaches Alfred only through its polls
// of the bot's notifications (Forgejo) or to-do list and lists (GitLab).
func TestLifecyclePoll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind forge.Kind
		repo string
	}{{forge.KindForgejo, "acceptance/sandbox"}, {forge.KindGitLab, "gitlab-org/gitlab-test"}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			e := startPollE2E(t, tc.kind, tc.repo)
			rs := e.forgejo.(forgetest.ReviewSeeder)

			e.forgejo.SetIssueAssignees(e.issue, "alice", forgetest.BotLogin)
			e.waitStatus("status::waiting_validation")
			require.Contains(t, e.comments()[0], "Thanks @alice, I am on it")

			e.forgejo.SetIssueLabels(e.issue, "alice", append(e.forgejo.IssueLabels(e.issue), "ai::validate_plan")...)
			e.waitStatus("status::in_ci")
			require.Contains(t, strings.Join(e.comments(), "\n"), "Plan validated by @alice.")
			mrs := e.forgejo.MergeRequests(tc.repo)
			require.Len(t, mrs, 1)
			mr := mrs[0]
			e.greenCI(mr.SourceBranch)
			e.waitStatus("status::in_review")

			// The review loop: an inline comment asking for a change is fixed on the branch.
			head := e.git("rev-parse", mr.SourceBranch)
			rs.AddReview(tc.repo, mr.Number, "alice", "changes_requested", "",
				forgetest.SeedReviewComment{Path: "export.csv", NewLine: 1, Body: "Please add a currency column."})
			fixed := e.waitHead(mr.SourceBranch, head)
			require.Equal(t, "date,amount,currency\n", e.git("show", fixed+":export.csv")+"\n")
			e.waitStatus("status::in_ci")
			e.greenCI(mr.SourceBranch)
			e.waitStatus("status::in_review")

			// alice merges; the issue is closed by the merge.
			e.forgejo.MarkMerged(tc.repo, mr.Number)
			e.waitStatus("status::done")
			e.requireUniqueMarkers()
		})
	}
}

// With transport [webhook, poll], alice's answer reaches Alfred twice: as the recorded
// comment delivery and through a poll of the bot's notifications. It is applied once: one
// decision, one technical analysis, no comment posted twice.
func TestWebhookAndPollApplyOnce(t *testing.T) {
	t.Parallel()
	e := startE2EConfig(t, storeSQLite, forge.KindForgejo, "acceptance/sandbox", time.Hour, func() string {
		agents, _ := scriptAgents(t, lifecycleScript)
		return agents
	}(), func(c *config.Config) {
		f := &c.Forges[0]
		f.Transport, f.PollInterval = config.Transports{config.TransportWebhook, config.TransportPoll}, 200*time.Millisecond
		f.BotUser = forgetest.BotLogin
	})
	setClockNow(e)
	e.issue.Number = e.forgejo.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: "Export the report as CSV",
		Body: "The monthly report should be downloadable.", Author: "alice", Labels: []string{"type::task"}})
	e.forgejo.SetIssueAssignees(e.issue, "alice", forgetest.BotLogin)
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(e.comments(), "\n"), "### q1. Which separator?") },
		e2eWait, 100*time.Millisecond, "no question block:\n%s", strings.Join(e.comments(), "\n---\n"))

	id := e.forgejo.AddComment(e.issue, "alice", "q1: b")
	require.Equal(t, http.StatusAccepted, e.send("006-issue_comment-created", func(doc map[string]any) {
		doc["issue"].(map[string]any)["number"] = e.issue.Number
		doc["comment"].(map[string]any)["body"] = "q1: b"
		doc["comment"].(map[string]any)["id"] = id
	}))
	e.waitStatus("status::waiting_validation")
	// Let the polls after the answer run before counting.
	before := e.pollsDone()
	require.Eventually(t, func() bool { return e.pollsDone() >= before+2 }, 30*time.Second, 50*time.Millisecond)
	body := e.forgejo.IssueBody(e.issue)
	require.Equal(t, 1, strings.Count(body, "| q1. Which separator? | b. Semicolon | @alice |"), "the description:\n%s", body)
	plans := 0
	for _, c := range e.comments() {
		if strings.Contains(c, "Add the `ai::validate_plan` label to let me start") {
			plans++
		}
	}
	require.Equal(t, 1, plans, "one technical analysis, one plan")
	e.requireUniqueMarkers()
}

// pollsDone counts the polls of the e2e's Forgejo stand-in so far (its notifications read).
func (e *e2e) pollsDone() int {
	e.t.Helper()
	n := 0
	for _, r := range e.forgejo.(*forgetest.ForgejoServer).Requests() {
		if strings.Contains(r, "/notifications?") {
			n++
		}
	}
	return n
}

// setClockNow starts the stand-in's clock at the wall clock, as a real forge's and Alfred's
// agree: a poll compares the forge's comment times with the mailbox's start.
func setClockNow(e *e2e) {
	e.forgejo.(interface{ SetClock(time.Time) }).SetClock(time.Now().UTC().Truncate(time.Second))
}
