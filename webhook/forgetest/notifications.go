package forgetest

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// This file holds what the polling transport reads (spec/transport.md): Forgejo's
// notification threads of the token's account, GitLab's to-do list and the bot's merge
// requests, all derived from the model as the real forges record them, so that every change
// made through the API or a seeding helper shows up as it would on the forge.

// modelNotification is one notification thread (Forgejo/Gitea) or to-do item (GitLab) of the
// bot account.
type modelNotification struct {
	id      int64
	repo    *modelRepo
	is      *modelIssue
	updated time.Time
	action  string // GitLab to-do action_name; "" for a Forgejo thread
}

// notifiedAtLocked is when Forgejo/Gitea last notified login of the thread is: the newest
// change made by another account that notifies a participant (the issue opened, a comment, an
// assignment of login, a close or reopen, a review or review comment, a merge). A label change
// notifies nobody. Zero when login does not take part in the thread (author, assignee,
// commenter, reviewer or mentioned) or nothing notified it.
func (m *model) notifiedAtLocked(is *modelIssue, login string) time.Time {
	other := func(u *modelUser) bool { return u != nil && !strings.EqualFold(u.login, login) }
	part := strings.EqualFold(is.author.login, login) || containsFold(is.assignees, login) || containsFold(is.reviewers, login)
	var at time.Time
	later := func(t time.Time) { at = maxTime(at, t) }
	if other(is.author) {
		later(is.created)
	}
	mention := "@" + strings.ToLower(login)
	for _, c := range is.comments {
		if c.system {
			continue
		}
		if !other(c.author) {
			part = true
			continue
		}
		if strings.Contains(strings.ToLower(c.body), mention) {
			part = true
		}
		later(c.created)
	}
	for _, a := range is.activity {
		if strings.EqualFold(a.Actor.Login, login) {
			continue
		}
		switch a.Kind {
		case forge.ActivityAssigned, forge.ActivityUnassigned:
			if strings.EqualFold(a.Login, login) {
				part = true
				later(a.At)
			}
		case forge.ActivityClosed, forge.ActivityReopened:
			later(a.At)
		}
	}
	for _, rv := range is.reviews {
		if rv.state == "REQUEST_REVIEW" && strings.EqualFold(rv.author.login, login) {
			part = true
		}
		if other(rv.author) && rv.state != "REQUEST_REVIEW" {
			later(rv.submitted)
		}
	}
	for _, rc := range is.threadNotes {
		if other(rc.author) {
			later(rc.created)
		}
	}
	if is.mr && is.state != "open" {
		later(is.updated) // merged or closed
	}
	if !part {
		return time.Time{}
	}
	return at
}

// notificationsLocked lists the bot's Forgejo notification threads updated at or after since,
// newest first (Forgejo orders by updated_unix desc).
func (m *model) notificationsLocked(since time.Time) []modelNotification {
	var out []modelNotification
	for _, r := range m.repos {
		for _, is := range r.allThreadsLocked() {
			at := m.notifiedAtLocked(is, BotLogin)
			if at.IsZero() || at.Before(since) {
				continue
			}
			out = append(out, modelNotification{id: is.id, repo: r, is: is, updated: at})
		}
	}
	slices.SortFunc(out, func(a, b modelNotification) int { return cmp.Or(b.updated.Compare(a.updated), cmp.Compare(b.id, a.id)) })
	return out
}

// todosLocked lists the bot's pending GitLab to-do items, newest first: "assigned" for every
// assignment of the bot by someone else, "mentioned" for every comment of someone else that
// mentions it, "review_requested" when it is a reviewer of another's merge request. Their ids are
// stable: the comment's id, or derived from the thread's id and the change's place.
func (m *model) todosLocked() []modelNotification {
	var out []modelNotification
	for _, r := range m.repos {
		for _, is := range r.allThreadsLocked() {
			for i, a := range is.activity {
				if a.Kind == forge.ActivityAssigned && strings.EqualFold(a.Login, BotLogin) && !strings.EqualFold(a.Actor.Login, BotLogin) {
					out = append(out, modelNotification{id: is.id*1000 + int64(i), repo: r, is: is, updated: a.At, action: "assigned"})
				}
			}
			for _, c := range is.comments {
				if !c.system && !strings.EqualFold(c.author.login, BotLogin) && strings.Contains(strings.ToLower(c.body), "@"+strings.ToLower(BotLogin)) {
					out = append(out, modelNotification{id: c.id, repo: r, is: is, updated: c.created, action: "mentioned"})
				}
			}
			if is.mr && containsFold(is.reviewers, BotLogin) && !strings.EqualFold(is.author.login, BotLogin) {
				out = append(out, modelNotification{id: is.id*1000 + 999, repo: r, is: is, updated: is.updated, action: "review_requested"})
			}
		}
	}
	slices.SortFunc(out, func(a, b modelNotification) int { return cmp.Or(b.updated.Compare(a.updated), cmp.Compare(b.id, a.id)) })
	return out
}

// authoredMRsLocked lists the merge requests of login updated at or after since, newest first.
func (m *model) authoredMRsLocked(login string, since time.Time) []assignedIssue {
	var out []assignedIssue
	for _, r := range m.repos {
		for _, mi := range r.allMRsLocked(m.sharedNumbers) {
			if strings.EqualFold(mi.author.login, login) && !mi.updated.Before(since) {
				out = append(out, assignedIssue{repo: r, is: mi})
			}
		}
	}
	slices.SortFunc(out, func(a, b assignedIssue) int {
		return cmp.Or(b.is.updated.Compare(a.is.updated), cmp.Compare(b.is.id, a.is.id))
	})
	return out
}

// refreshHeadsLocked moves the head of every open merge request whose repository's clone URL is
// a local git repository to its source branch's head there (and its updated time with it, as a
// push does on the forges), so that a poll reads the commits pushed to the branch, not the
// stand-in's stable fake head. Branches set with SetBranch are left alone.
func (m *model) refreshHeadsLocked() {
	for _, r := range m.repos {
		if st, err := os.Stat(r.cloneURL); err != nil || !st.IsDir() {
			continue
		}
		for _, mi := range r.allMRsLocked(m.sharedNumbers) {
			if _, set := r.branches[mi.source]; set || mi.state != "open" {
				continue
			}
			out, err := exec.Command("git", "--git-dir", r.cloneURL, "rev-parse", "--verify", "-q", "refs/heads/"+mi.source).Output()
			if sha := strings.TrimSpace(string(out)); err == nil && sha != "" && sha != mi.sha {
				mi.sha, mi.updated = sha, m.now()
			}
		}
	}
}

// allThreadsLocked returns the repository's issues and merge requests.
func (r *modelRepo) allThreadsLocked() []*modelIssue {
	out := make([]*modelIssue, 0, len(r.issues)+len(r.mrs))
	for _, is := range r.issues {
		out = append(out, is)
	}
	for _, mi := range r.mrs {
		out = append(out, mi)
	}
	return out
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// fjNotifications answers GET /notifications for what Alfred asks: all=true (read and unread
// threads), subject-type issue and/or pull, since (RFC 3339, compared with the thread's
// updated_at), newest first, paginated like every list, in the shape of Gitea's
// NotificationThread. Other filters are refused with 422 so a client asking for more is noticed.
func (s *ForgejoServer) fjNotifications(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("all") != "true" || q.Has("status-types") {
		s.fjError(w, http.StatusUnprocessableEntity, "forgetest: only all=true is modelled")
		return
	}
	types := map[string]bool{}
	for _, t := range q["subject-type"] {
		types[strings.ToLower(t)] = true
	}
	since, ok := fjSince(w, r, s)
	if !ok {
		return
	}
	s.refreshHeadsLocked()
	out := []any{}
	for _, n := range s.notificationsLocked(since) {
		typ, kind := "Issue", "issues"
		if n.is.mr {
			typ, kind = "Pull", "pulls"
		}
		if len(types) > 0 && !types[strings.ToLower(typ)] {
			continue
		}
		api := fmt.Sprintf("%s/api/v1/repos/%s/%s/%d", s.URL, n.repo.path, kind, n.is.number)
		out = append(out, map[string]any{
			"id": n.id, "repository": s.fjRepo(n.repo), "unread": true, "pinned": false,
			"updated_at": fjTime(n.updated), "url": fmt.Sprintf("%s/api/v1/notifications/threads/%d", s.URL, n.id),
			"subject": map[string]any{
				"title": n.is.title, "url": api, "html_url": fmt.Sprintf("%s/%s/%s/%d", s.URL, n.repo.path, kind, n.is.number),
				"latest_comment_url": "", "latest_comment_html_url": "", "type": typ, "state": fjState(n.is),
			},
		})
	}
	fjPaginateAs(w, r, s.pageSize, out, totalOnly)
}

// glTodos answers GET /todos for what Alfred asks: state=pending (the default), newest first,
// paginated like every list, in GitLab's shape (project, author, action_name, target_type,
// target with its iid, created_at).
func (s *GitLabServer) glTodos(w http.ResponseWriter, r *http.Request) {
	if st := r.URL.Query().Get("state"); st != "" && st != "pending" {
		glJSON(w, http.StatusBadRequest, map[string]any{"error": "forgetest: only state=pending is modelled"})
		return
	}
	s.refreshHeadsLocked()
	out := []any{}
	for _, n := range s.todosLocked() {
		typ := "Issue"
		if n.is.mr {
			typ = "MergeRequest"
		}
		out = append(out, map[string]any{
			"id": n.id, "project": s.glProjectJSON(n.repo), "author": s.glUser(n.is.author), "action_name": n.action,
			"target_type": typ, "target": s.glIssueJSON(n.repo, n.is), "target_url": fmt.Sprintf("%s/%s", s.URL, n.repo.path),
			"body": n.is.title, "state": "pending", "created_at": n.updated.Format(time.RFC3339Nano),
		})
	}
	glPaginate(w, r, s.pageSize, out)
}

// glMergeRequests answers GET /merge_requests for what Alfred asks: author_username,
// state=all, scope=all and updated_after, ordered updated_at desc, paginated like every list.
// Other filters are refused with 400.
func (s *GitLabServer) glMergeRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	login := q.Get("author_username")
	if login == "" || q.Get("state") != "all" || q.Get("scope") != "all" {
		glJSON(w, http.StatusBadRequest, map[string]any{"error": "forgetest: only author_username&state=all&scope=all is modelled"})
		return
	}
	var since time.Time
	if v := q.Get("updated_after"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			glJSON(w, http.StatusBadRequest, map[string]any{"error": "updated_after is invalid"})
			return
		}
		since = t
	}
	out := []any{}
	for _, a := range s.authoredMRsLocked(login, since) {
		out = append(out, s.glIssueJSON(a.repo, a.is))
	}
	glPaginate(w, r, s.pageSize, out)
}

var _ forge.Poller = (*Fake)(nil)

// Changes implements forge.Poller as the client of the Fake's kind does: Forgejo's
// notification threads and assigned issues; GitLab's to-do items, assigned issues and the
// bot's merge requests.
func (f *Fake) Changes(ctx context.Context, since time.Time) (out []forge.Change, err error) {
	if err := f.enter(ctx, "Changes", "", forge.IssueRef{}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshHeadsLocked()
	ref := func(n modelNotification) forge.IssueRef {
		return forge.IssueRef{Repo: n.repo.path, Number: n.is.number, MergeRequest: n.is.mr}
	}
	if f.kind == forge.KindGitLab {
		for _, n := range f.todosLocked() {
			if !n.updated.Before(since) {
				out = append(out, forge.Change{Ref: ref(n), UpdatedAt: n.updated, Source: fmt.Sprintf("todo %d %s", n.id, n.action)})
			}
		}
		for _, a := range f.authoredMRsLocked(BotLogin, since) {
			out = append(out, forge.Change{Ref: forge.IssueRef{Repo: a.repo.path, Number: a.is.number, MergeRequest: true},
				UpdatedAt: a.is.updated, Source: "authored merge request"})
		}
	} else {
		for _, n := range f.notificationsLocked(since) {
			out = append(out, forge.Change{Ref: ref(n), UpdatedAt: n.updated, Source: fmt.Sprintf("notification %d", n.id)})
		}
	}
	for _, a := range f.assignedLocked(BotLogin, since) {
		out = append(out, forge.Change{Ref: forge.IssueRef{Repo: a.repo.path, Number: a.is.number}, UpdatedAt: a.is.updated, Source: "assigned issue"})
	}
	return out, nil
}
