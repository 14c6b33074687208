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

// gitlabReview is a review of someone else's merge request on the GitLab stand-in, asked of the
// bot by alice, behind a front where fail may answer a request 500 before the stand-in sees it.
type gitlabReview struct {
	c     *gitlab.Client
	store *mailboxtest.Store
	m     *mailbox.Machine
	mr    forge.IssueRef
}

func setupGitLabReview(t *testing.T, result *phase.Result, cfg mailbox.Config, fail func(r *http.Request) bool) *gitlabReview {
	t.Helper()
	srv := forgetest.NewGitLabServer(t)
	up, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(up)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail(r) {
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
	h := &gitlabReview{c: c, mr: forge.IssueRef{Forge: "f", Repo: repo, Number: n, MergeRequest: true}}
	clk := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	h.store = mailboxtest.NewStore(clk.Now)
	exec := &scriptedJobs{fake: srv, results: map[string]*phase.Result{"review": result}, failures: map[string]string{}}
	cfg.CIWait, cfg.CIPoll = time.Minute, time.Minute
	h.m = mailbox.NewMachine(cfg, h.store, map[string]mailbox.Bot{"f": {Forge: c, Login: forgetest.BotLogin}}, exec, clk.Now,
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	_, err = h.store.Deliver(t.Context(), forge.Event{Forge: "f", Kind: forge.KindGitLab, DeliveryID: "d-1", BodyHash: "h-1",
		Type: forge.EventReviewRequested, Target: h.mr, Sender: forge.User{Login: "alice"},
		ReviewRequested: []string{forgetest.BotLogin}, ReceivedAt: clk.Now()})
	require.NoError(t, err)
	return h
}

// advance makes one pass over the merge request's mailbox and returns its error and the mailbox.
func (h *gitlabReview) advance(t *testing.T) (*mailbox.Mailbox, error) {
	t.Helper()
	mb, err := h.store.Find(t.Context(), h.mr)
	require.NoError(t, err)
	return mb, h.m.Advance(t.Context(), mb)
}

// count returns how many of the merge request's notes hold each of texts.
func (h *gitlabReview) count(t *testing.T, texts ...string) map[string]int {
	t.Helper()
	cs, err := h.c.ReviewComments(t.Context(), repo, h.mr.Number)
	require.NoError(t, err)
	count := map[string]int{}
	for _, rc := range cs {
		for _, text := range texts {
			if strings.Contains(rc.Body, text) {
				count[text]++
			}
		}
	}
	return count
}

// A review Alfred posts on GitLab is one discussion per inline comment, then the summary note.
// When the summary fails (a 500 past the client's retries) the pass is applied again: every
// part of the review is on the merge request once, none twice.
func TestReviewPostedHalfWayIsCompletedOnce(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	h := setupGitLabReview(t, &phase.Result{Summary: "Two things.", ReviewComments: []phase.ReviewNote{
		{Path: "a.go", Line: 1, Body: "Check the error."}, {Path: "b.go", Line: 2, Body: "Rename this."}}},
		mailbox.Config{}, func(r *http.Request) bool {
			// The first summary note (a plain note on the merge request) fails.
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/merge_requests/1/notes") &&
				failed.CompareAndSwap(false, true)
		})
	_, err := h.advance(t)
	require.Error(t, err, "the summary fails")
	require.True(t, failed.Load())
	var mb *mailbox.Mailbox
	for range 3 {
		mb, err = h.advance(t)
		require.NoError(t, err)
	}
	require.Equal(t, mailbox.StateIdle, mb.State, "the review is posted and the merge request waits for the next request")
	require.Equal(t, map[string]int{"Check the error.": 1, "Rename this.": 1, "Two things.": 1},
		h.count(t, "Check the error.", "Rename this.", "Two things."))
}

// GitLab approves after the review's summary: when the approval fails the pass is applied again,
// and the review concluded with an approval is approved once, its notes not posted again.
func TestReviewApprovalThatFailedAfterItsSummaryIsGivenOnce(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	var approved atomic.Int32
	h := setupGitLabReview(t, &phase.Result{Summary: "Fine.", ReviewVerdict: phase.VerdictApprove},
		mailbox.Config{ReviewVerdicts: true}, func(r *http.Request) bool {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/merge_requests/1/approve") {
				return false
			}
			if failed.CompareAndSwap(false, true) {
				return true
			}
			approved.Add(1)
			return false
		})
	_, err := h.advance(t)
	require.Error(t, err, "the approval fails")
	var mb *mailbox.Mailbox
	for range 3 {
		mb, err = h.advance(t)
		require.NoError(t, err)
	}
	require.Equal(t, mailbox.StateIdle, mb.State)
	require.EqualValues(t, 1, approved.Load(), "the approval the run concluded is given")
	require.Equal(t, map[string]int{"Fine.": 1}, h.count(t, "Fine."), "the summary is posted once")
}

// GitLab creates Alfred's first note on the issue, but the answer is lost on the
// way back (a proxy in front of GitLab answers 502 after its upstream wrote the note). The
// client, built as cmd/alfred builds it (default retries), does not post it again: the next pass
// finds it by its marker, and the issue has one comment per key.
func TestANoteTheForgeMadeBeforeA502IsPostedOnce(t *testing.T) {
	t.Parallel()
	srv := forgetest.NewGitLabServer(t)
	front := forgetest.NewLostAnswer(t, srv.URL, func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/issues/1/notes") // GitLab writes the note
	})
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: front.URL, Token: srv.Token,
		RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
	require.NoError(t, err)
	srv.AddRepo(repo, "main", "/nonexistent.git")
	srv.SetAccessLevel(repo, "alice", 30)
	n := srv.AddIssue(repo, forgetest.SeedIssue{Title: "Export CSV", Body: "We need a CSV export.", Author: "alice", Labels: []string{"type::task"}})
	require.Equal(t, int64(1), n)
	ref := forge.IssueRef{Forge: "f", Repo: repo, Number: n}
	clk := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	store := mailboxtest.NewStore(clk.Now)
	exec := &scriptedJobs{fake: srv, results: map[string]*phase.Result{}, failures: map[string]string{}}
	m := mailbox.NewMachine(mailbox.Config{CIWait: time.Minute, CIPoll: time.Minute}, store,
		map[string]mailbox.Bot{"f": {Forge: c, Login: forgetest.BotLogin}}, exec, clk.Now,
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	srv.SetIssueAssignees(ref, "alice", forgetest.BotLogin)
	_, err = store.Deliver(t.Context(), forge.Event{Forge: "f", Kind: forge.KindGitLab, DeliveryID: "d-1", BodyHash: "h-1",
		Type: forge.EventAssignees, Target: ref, Sender: forge.User{Login: "alice"}, AssigneesKnown: true,
		Assignees: []string{forgetest.BotLogin}, ReceivedAt: clk.Now()})
	require.NoError(t, err)
	for range 3 {
		mb, err := store.Find(t.Context(), ref)
		require.NoError(t, err)
		_ = m.Advance(t.Context(), mb)
	}
	require.True(t, front.Lost(), "the first note's answer was lost")
	seen := map[string]int{}
	for _, cm := range srv.IssueComments(ref) {
		if k, _, ok := mailbox.ParseMarker(cm.Body); ok {
			seen[k]++
		}
	}
	require.Equal(t, 1, seen["ack-1"], "the note whose answer was lost")
	for k, n := range seen {
		require.Equal(t, 1, n, "comment %s posted %d times", k, n)
	}
}
