package mailbox_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// A review Alfred posts on GitLab is one discussion per inline comment, then the summary note.
// When the summary fails (a 500 past the client's retries) the pass is applied again: every
// part of the review is on the merge request once, none twice.
func TestReviewPostedHalfWayIsCompletedOnce(t *testing.T) {
	t.Parallel()
	srv := forgetest.NewGitLabServer(t)
	var failed atomic.Bool
	up, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(up)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first summary note (a plain note on the merge request) fails.
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/merge_requests/1/notes") && failed.CompareAndSwap(false, true) {
			http.Error(w, `{"message":"500 Internal Server Error"}`, http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: front.URL, Token: srv.Token, MaxRetries: -1})
	require.NoError(t, err)
	srv.AddRepo(repo, "main", "/nonexistent.git")
	srv.SetAccessLevel(repo, "alice", 30)
	n := srv.AddMergeRequest(repo, "feature", "main", "Feature", "alice")
	require.Equal(t, int64(1), n)
	mr := forge.IssueRef{Forge: "f", Repo: repo, Number: n, MergeRequest: true}

	clk := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := mailboxtest.NewStore(clk.Now)
	exec := &scriptedJobs{fake: srv, results: map[string]*phase.Result{
		"review": {Summary: "Two things.", ReviewComments: []phase.ReviewNote{
			{Path: "a.go", Line: 1, Body: "Check the error."}, {Path: "b.go", Line: 2, Body: "Rename this."}}},
	}, failures: map[string]string{}}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	m := mailbox.NewMachine(mailbox.Config{CIWait: time.Minute, CIPoll: time.Minute}, store,
		map[string]mailbox.Bot{"f": {Forge: c, Login: forgetest.BotLogin}}, exec, clk.Now, log)
	_, err = store.Deliver(t.Context(), forge.Event{Forge: "f", Kind: forge.KindGitLab, DeliveryID: "d-1", BodyHash: "h-1",
		Type: forge.EventReviewRequested, Target: mr, Sender: forge.User{Login: "alice"},
		ReviewRequested: []string{forgetest.BotLogin}, ReceivedAt: clk.Now()})
	require.NoError(t, err)

	mb, err := store.Find(t.Context(), mr)
	require.NoError(t, err)
	require.Error(t, m.Advance(t.Context(), mb), "the summary fails")
	require.True(t, failed.Load())
	for range 3 {
		mb, err = store.Find(t.Context(), mr)
		require.NoError(t, err)
		require.NoError(t, m.Advance(t.Context(), mb))
	}
	require.Equal(t, mailbox.StateIdle, mb.State, "the review is posted and the merge request waits for the next request")
	count := map[string]int{}
	cs, err := c.ReviewComments(t.Context(), repo, n)
	require.NoError(t, err)
	for _, rc := range cs {
		for _, text := range []string{"Check the error.", "Rename this.", "Two things."} {
			if strings.Contains(rc.Body, text) {
				count[text]++
			}
		}
	}
	require.Equal(t, map[string]int{"Check the error.": 1, "Rename this.": 1, "Two things.": 1}, count)
}

// GitLab approves after the review's summary: when the approval fails the pass is applied again,
// and the review concluded with an approval is approved once, its notes not posted again.
func TestReviewApprovalThatFailedAfterItsSummaryIsGivenOnce(t *testing.T) {
	t.Parallel()
	srv := forgetest.NewGitLabServer(t)
	var failed atomic.Bool
	var approved atomic.Int32
	up, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(up)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/merge_requests/1/approve") {
			if failed.CompareAndSwap(false, true) {
				http.Error(w, `{"message":"500 Internal Server Error"}`, http.StatusInternalServerError)
				return
			}
			approved.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	c, err2 := gitlab.NewClient(gitlab.ClientConfig{BaseURL: front.URL, Token: srv.Token, MaxRetries: -1})
	require.NoError(t, err2)
	srv.AddRepo(repo, "main", "/nonexistent.git")
	srv.SetAccessLevel(repo, "alice", 30)
	n := srv.AddMergeRequest(repo, "feature", "main", "Feature", "alice")
	mr := forge.IssueRef{Forge: "f", Repo: repo, Number: n, MergeRequest: true}
	clk := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := mailboxtest.NewStore(clk.Now)
	exec := &scriptedJobs{fake: srv, results: map[string]*phase.Result{
		"review": {Summary: "Fine.", ReviewVerdict: phase.VerdictApprove},
	}, failures: map[string]string{}}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	m := mailbox.NewMachine(mailbox.Config{CIWait: time.Minute, CIPoll: time.Minute, ReviewVerdicts: true}, store,
		map[string]mailbox.Bot{"f": {Forge: c, Login: forgetest.BotLogin}}, exec, clk.Now, log)
	_, err = store.Deliver(t.Context(), forge.Event{Forge: "f", Kind: forge.KindGitLab, DeliveryID: "d-1", BodyHash: "h-1",
		Type: forge.EventReviewRequested, Target: mr, Sender: forge.User{Login: "alice"},
		ReviewRequested: []string{forgetest.BotLogin}, ReceivedAt: clk.Now()})
	require.NoError(t, err)
	mb, err := store.Find(t.Context(), mr)
	require.NoError(t, err)
	require.Error(t, m.Advance(t.Context(), mb), "the approval fails")
	for range 3 {
		mb, err = store.Find(t.Context(), mr)
		require.NoError(t, err)
		require.NoError(t, m.Advance(t.Context(), mb))
	}
	require.Equal(t, mailbox.StateIdle, mb.State)
	require.EqualValues(t, 1, approved.Load(), "the approval the run concluded is given")
	cs, err := c.ReviewComments(t.Context(), repo, n)
	require.NoError(t, err)
	summaries := 0
	for _, rc := range cs {
		if strings.Contains(rc.Body, "Fine.") {
			summaries++
		}
	}
	require.Equal(t, 1, summaries, "the summary is posted once")
}
