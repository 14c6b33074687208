package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// forgeState is what the forge stand-in holds of the issue and its repository: what Alfred
// may not change in shadow mode.
type forgeState struct {
	Comments, Labels, Assignees, RepoLabels, Branches []string
	Body                                              string
	MergeRequests                                     int
}

func (e *e2e) forgeState() forgeState {
	e.t.Helper()
	out, err := exec.Command("git", "-C", e.bare, "for-each-ref", "--format=%(refname)").CombinedOutput()
	require.NoError(e.t, err, "%s", out)
	return forgeState{Comments: e.comments(), Labels: e.forgejo.IssueLabels(e.issue),
		Assignees: e.forgejo.IssueAssignees(e.issue), RepoLabels: e.forgejo.RepoLabels(e.issue.Repo),
		Branches: strings.Fields(string(out)), Body: e.forgejo.IssueBody(e.issue),
		MergeRequests: len(e.forgejo.MergeRequests(e.issue.Repo))}
}

// waitState waits until the issue's mailbox is saved in state want (the store's row: in
// shadow mode the forge shows nothing).
func (e *e2e) waitState(want mailbox.State) *mailbox.Mailbox {
	e.t.Helper()
	var mb *mailbox.Mailbox
	require.Eventually(e.t, func() bool {
		var err error
		mb, err = e.srv.store.Find(context.Background(), e.issue)
		return err == nil && mb.State == want
	}, e2eWait, 100*time.Millisecond, "state %s never came", want)
	return mb
}

// shadowWrites waits until the issue has a shadow write of kind and returns them all.
func (e *e2e) shadowWrites(kind mailbox.ShadowKind) []mailbox.ShadowWrite {
	e.t.Helper()
	var ws []mailbox.ShadowWrite
	require.Eventually(e.t, func() bool {
		var err error
		ws, err = e.srv.store.ShadowWrites(context.Background(), e.issue)
		require.NoError(e.t, err)
		for _, w := range ws {
			if w.Kind == kind {
				return true
			}
		}
		return false
	}, e2eWait, 100*time.Millisecond, "no shadow %s", kind)
	return ws
}

// restart stops the server and starts a new one on the same store, data and forge, with
// mutate applied to the configuration: an operator's edit of the configuration file.
func (e *e2e) restart(mutate func(*config.Config)) {
	e.t.Helper()
	e.cancel()
	require.NoError(e.t, <-e.done)
	require.NoError(e.t, e.srv.Close())
	cfg := e.srv.cfg
	mutate(cfg)
	log := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := newServer(context.Background(), cfg, log)
	require.NoError(e.t, err)
	ln, err := net.Listen("tcp", strings.TrimPrefix(e.url, "http://"))
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	e.srv, e.cancel = srv, cancel
	go func() { e.done <- srv.Serve(ctx, ln) }()
	e.t.Cleanup(func() {
		cancel()
		err := <-e.done
		_ = srv.Close()
		e.done <- err // for the first server's clean-up, which waits on it too
	})
}

// adminPage reads a page of the admin listener with the admin token.
func (e *e2e) adminPage(path string) string {
	e.t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	w := httptest.NewRecorder()
	e.srv.admin.ServeHTTP(w, r)
	require.Equal(e.t, http.StatusOK, w.Code, path)
	return w.Body.String()
}

// A project in shadow mode (its organization's scope) goes from the assignment through the
// questions, the answer, the analyses and the plan's validation to the development run with
// no write to the forge: the stand-in's comments, labels, assignees, description, repository
// labels, branches and pull requests stay as the humans left them, and the mailbox page shows
// every post Alfred would have made, rendered. Switched to live, the next step posts: the
// held development run starts, pushes and opens the pull request, and the shadow history is not
// replayed.
func TestShadowModeWritesNothingThenLivePosts(t *testing.T) {
	t.Parallel()
	for _, store := range e2eStores {
		t.Run("store="+store, func(t *testing.T) {
			t.Parallel()
			shadowModeWritesNothingThenLivePosts(t, store)
		})
	}
}

func shadowModeWritesNothingThenLivePosts(t *testing.T, store string) {
	agents, _ := scriptAgents(t, lifecycleScript)
	on := true
	e := startE2EConfig(t, store, forge.KindForgejo, "acceptance/sandbox", 24*time.Hour, agents,
		func(c *config.Config) { c.Scopes = map[string]config.Scope{"acceptance": {Shadow: &on}} })
	ctx := context.Background()

	// The humans' own writes come first: alice labels the issue type::task and assigns the bot.
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	before := e.forgeState()
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitState(mailbox.StateWaitingInfo)
	e.shadowWrites(mailbox.ShadowComment)
	require.Equal(t, before, e.forgeState(), "shadow mode writes nothing to the forge")

	// alice reads the questions on the pages and answers on the forge.
	require.Equal(t, http.StatusAccepted, e.send("006-issue_comment-created", func(doc map[string]any) {
		doc["comment"].(map[string]any)["body"] = "q1: b"
		doc["comment"].(map[string]any)["id"] = 4242
	}))
	e.waitState(mailbox.StateWaitingValidation)

	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	before.Labels = e.forgejo.IssueLabels(e.issue)
	before.RepoLabels = e.forgejo.RepoLabels(e.issue.Repo)
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(before.Labels...)))
	ws := e.shadowWrites(mailbox.ShadowRun)
	mb := e.waitState(mailbox.StateInDevelopment)
	require.Equal(t, before, e.forgeState(), "no comment, label, assignee, description, branch or pull request")

	var kinds []string
	for _, w := range ws {
		kinds = append(kinds, string(w.Kind))
	}
	all := strings.Join(kinds, " ")
	for _, k := range []string{"comment", "edit_comment", "labels", "assignees", "issue_body", "run"} {
		require.Contains(t, all, k, "shadow writes: %s", all)
	}

	// The mailbox page shows each post, rendered as the forge renders Markdown.
	page := e.adminPage("/ui/mailboxes/" + strconv.FormatInt(mb.ID, 10))
	require.Contains(t, page, "Shadow mode: what Alfred would have written")
	require.Contains(t, page, "Thanks @alice, I am on it")
	require.Contains(t, page, "<h3>q1. Which separator?</h3>")
	require.Contains(t, page, "<td>b. Semicolon</td>", "the description's decisions table")
	require.Contains(t, page, "would add the labels status::waiting_info")
	require.Contains(t, page, "would start the development run; shadow mode starts no run that pushes")
	require.NotContains(t, page, "alfred:key=", "the markers stay hidden")
	require.Contains(t, e.adminPage("/ui/"), `<span class="badge shadow">shadow</span>`, "the list says so")

	// Live: the next step posts normally.
	e.restart(func(c *config.Config) { c.Scopes = nil })
	recorded, err := e.srv.store.ShadowWrites(ctx, e.issue)
	require.NoError(t, err)
	e.waitStatus("status::in_ci")
	mrs := e.forgejo.MergeRequests(e.issue.Repo)
	require.Len(t, mrs, 1)
	comments := strings.Join(e.comments(), "\n")
	require.Contains(t, comments, "I opened pull request #")
	require.NotContains(t, comments, "Thanks @alice, I am on it", "the shadow history is not replayed")
	require.NotContains(t, comments, "### q1. Which separator?")
	e.requireUniqueMarkers()
	after, err := e.srv.store.ShadowWrites(ctx, e.issue)
	require.NoError(t, err)
	require.Equal(t, recorded, after, "live mode records nothing")
}

// The same on the GitLab stand-in, the project itself in shadow mode: no note, label,
// assignee, description, branch or merge request until the project is live; then the held
// development run pushes and opens the merge request.
func TestShadowModeGitLab(t *testing.T) {
	t.Parallel()
	agents, _ := scriptAgents(t, lifecycleScript)
	on := true
	e := startE2EConfig(t, storeSQLite, forge.KindGitLab, "gitlab-org/gitlab-test", 24*time.Hour, agents,
		func(c *config.Config) { c.Scopes = map[string]config.Scope{"gitlab-org/gitlab-test": {Shadow: &on}} })
	ctx := context.Background()
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	before := e.forgeState()

	require.Equal(t, http.StatusAccepted, e.sendGitLab("issue_hook_open_with_changes", "Issue Hook", glAssignTask))
	e.waitState(mailbox.StateWaitingInfo)
	require.Equal(t, http.StatusAccepted, e.sendGitLab("note_hook_issue", "Note Hook", func(doc map[string]any) {
		doc["user"].(map[string]any)["username"] = "alice"
		doc["object_attributes"].(map[string]any)["note"] = "Q1: 2"
		doc["object_attributes"].(map[string]any)["id"] = 98765
		doc["issue"].(map[string]any)["iid"] = 1
	}))
	e.waitState(mailbox.StateWaitingValidation)
	require.Equal(t, before, e.forgeState(), "shadow mode writes nothing to the forge")

	current := e.forgejo.IssueLabels(e.issue)
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	before.Labels = e.forgejo.IssueLabels(e.issue)
	before.RepoLabels = e.forgejo.RepoLabels(e.issue.Repo)
	require.Equal(t, http.StatusAccepted, e.sendGitLab("issue_hook_update_label_added", "Issue Hook", func(doc map[string]any) {
		doc["object_attributes"].(map[string]any)["iid"] = 1
		doc["user"].(map[string]any)["username"] = "alice"
		doc["labels"] = glLabels(before.Labels...)
		doc["changes"] = map[string]any{"labels": map[string]any{"previous": glLabels(current...), "current": glLabels(before.Labels...)}}
	}))
	e.shadowWrites(mailbox.ShadowRun)
	mb := e.waitState(mailbox.StateInDevelopment)
	require.Equal(t, before, e.forgeState(), "no note, label, assignee, description, branch or merge request")
	page := e.adminPage("/ui/mailboxes/" + strconv.FormatInt(mb.ID, 10))
	require.Contains(t, page, "<h3>q1. Which separator?</h3>")
	require.Contains(t, page, "<td>b. Semicolon</td>")

	e.restart(func(c *config.Config) { c.Scopes = nil })
	e.waitStatus("status::in_ci")
	require.Len(t, e.forgejo.MergeRequests(e.issue.Repo), 1)
	comments := strings.Join(e.comments(), "\n")
	require.Contains(t, comments, "I opened merge request !")
	require.NotContains(t, comments, "### q1. Which separator?", "the shadow history is not replayed")
	e.requireUniqueMarkers()
}
