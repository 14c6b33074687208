package forgetest

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// modelReview is a submitted Forgejo review or a review request (state REQUEST_REVIEW). On
// GitLab a review is only its notes: the body a merge request note, each inline comment a
// diff discussion.
type modelReview struct {
	id        int64
	summaryID int64 // the review's summary comment, in the comment id sequence
	author    *modelUser
	state     string // Forgejo API state: APPROVED, REQUEST_CHANGES, COMMENT, REQUEST_REVIEW
	body      string
	commit    string
	submitted time.Time
}

// modelReviewComment is an inline comment or a reply in a review thread.
type modelReviewComment struct {
	id         int64
	reviewID   int64  // Forgejo review, 0 on GitLab
	discussion string // GitLab discussion id
	author     *modelUser
	body       string
	pos        *forge.Position
	hunk       string
	created    time.Time
	resolved   bool
	resolvedBy *modelUser // who resolved it, when resolved
}

// SeedReviewComment is one inline comment for Seeder.AddReview, at a line of the new file
// (NewLine) or of the old one (OldLine). DiffHunk is what Forgejo reports as diff_hunk ("" gives
// a one-line hunk).
type SeedReviewComment struct {
	Path     string
	NewLine  int
	OldLine  int
	Body     string
	DiffHunk string
}

// fjReviewState maps the forge-neutral state of AddReview to Forgejo's API state.
func fjReviewState(state string) string {
	switch state {
	case "approved":
		return "APPROVED"
	case "changes_requested":
		return "REQUEST_CHANGES"
	case "requested":
		return "REQUEST_REVIEW"
	}
	return "COMMENT"
}

// AddReview submits a review of merge request number by login (added if needed): state is
// "changes_requested", "commented" or "approved". Forgejo keeps one review with the body and the
// inline comments; GitLab posts the body as a merge request note and opens one diff
// discussion per inline comment. It returns the ids of the inline comments, in order.
func (m *model) AddReview(repo string, number int64, login, state, body string, comments ...SeedReviewComment) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	mi := m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true})
	u := m.userOrNewLocked(login)
	return m.addReviewLocked(mi, u, fjReviewState(state), body, mi.sha, comments)
}

func (m *model) addReviewLocked(mi *modelIssue, u *modelUser, state, body, commit string, comments []SeedReviewComment) []int64 {
	now := m.now()
	var reviewID int64
	if m.sharedNumbers {
		rv := &modelReview{id: m.nextID(), summaryID: m.nextID(), author: u, state: state, body: body, commit: cmp.Or(commit, mi.sha), submitted: now}
		mi.reviews = append(mi.reviews, rv)
		reviewID = rv.id
	} else if body != "" {
		m.addCommentLocked(mi, u, body, false)
	}
	if verdict := map[string]string{"APPROVED": "approved", "REQUEST_CHANGES": "requested_changes"}[state]; !m.sharedNumbers && verdict != "" {
		// GitLab: the reviewer's state on the merge request (GET …/reviewers), its latest
		// verdict (a comment alone leaves it).
		if mi.reviewerStates == nil {
			mi.reviewerStates = map[string]string{}
		}
		if _, ok := mi.reviewerStates[u.login]; !ok {
			mi.reviewerOrder = append(mi.reviewerOrder, u.login)
		}
		mi.reviewerStates[u.login] = verdict
	}
	if !m.sharedNumbers && state == "APPROVED" {
		// GitLab: an approval, not a review. Approving again stands for revoking and approving
		// again (GitLab lets an account approve once): the approval's time moves.
		if !slices.Contains(mi.approvedBy, u.login) {
			mi.approvedBy = append(mi.approvedBy, u.login)
		}
		if mi.approvedAt == nil {
			mi.approvedAt = map[string]time.Time{}
		}
		mi.approvedAt[u.login] = now
	}
	var ids []int64
	for _, c := range comments {
		rc := m.addThreadNoteLocked(mi, u, reviewID, "", &forge.Position{Path: c.Path, NewLine: c.NewLine, OldLine: c.OldLine}, c.Body)
		if c.DiffHunk != "" {
			rc.hunk = c.DiffHunk
		}
		ids = append(ids, rc.id)
	}
	mi.updated = now
	return ids
}

// addThreadNoteLocked stores a thread comment; an empty discussion starts a new one (GitLab
// discussion ids are 40 hex digits).
func (m *model) addThreadNoteLocked(mi *modelIssue, u *modelUser, reviewID int64, discussion string, pos *forge.Position, body string) *modelReviewComment {
	id := m.nextID()
	if discussion == "" {
		sum := sha1.Sum(fmt.Appendf(nil, "discussion %d", id))
		discussion = hex.EncodeToString(sum[:])
	}
	rc := &modelReviewComment{id: id, reviewID: reviewID, discussion: discussion, author: u, body: body, pos: pos, created: m.now()}
	if thread := mi.discussionLocked(discussion); !m.sharedNumbers && len(thread) > 0 &&
		!slices.ContainsFunc(thread, func(n *modelReviewComment) bool { return !n.resolved }) {
		// GitLab resolves a reply in a resolved discussion, in its author's name
		// (Notes::BuildService): the discussion stays resolved.
		rc.resolved, rc.resolvedBy = true, u
	}
	if pos != nil {
		line := cmp.Or(pos.NewLine, pos.OldLine)
		rc.hunk = fmt.Sprintf("@@ -%d,1 +%d,1 @@\n %s line %d", line, line, pos.Path, line)
	}
	mi.threadNotes = append(mi.threadNotes, rc)
	return rc
}

// RequestReview asks login (added if needed) to review merge request number: Forgejo stores a
// REQUEST_REVIEW review row and lists login in requested_reviewers; GitLab adds a reviewer.
func (m *model) RequestReview(repo string, number int64, login string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mi := m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true})
	u := m.mustUserLocked(login)
	if m.sharedNumbers {
		mi.reviews = append(mi.reviews, &modelReview{id: m.nextID(), author: u, state: "REQUEST_REVIEW", submitted: m.now()})
	}
	if !slices.Contains(mi.reviewers, u.login) {
		mi.reviewers = append(mi.reviewers, u.login)
	}
}

// SetMergeStatus sets what the forge reports about merge request number's mergeability:
// forge.MergeStatusConflict makes Forgejo answer mergeable false and GitLab
// detailed_merge_status "conflict" with has_conflicts true; forge.MergeStatusChecking GitLab
// "checking" and Forgejo mergeable false. The default is mergeable.
func (m *model) SetMergeStatus(repo string, number int64, st forge.MergeStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}).mergeStatus = st
}

// ThreadComments returns merge request number's inline comments and thread replies, oldest
// first, as the forge stores them: Thread is the GitLab discussion id or, on Forgejo, the path
// and line key of forge.ReviewComment; Resolved is set once a thread was resolved.
func (m *model) ThreadComments(repo string, number int64) []forge.ReviewComment {
	m.mu.Lock()
	defer m.mu.Unlock()
	mi := m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true})
	var out []forge.ReviewComment
	for _, rc := range mi.threadNotes {
		out = append(out, m.reviewCommentLocked(mi, rc))
	}
	return out
}

func (m *model) reviewCommentLocked(mi *modelIssue, rc *modelReviewComment) forge.ReviewComment {
	out := forge.ReviewComment{
		ID: rc.id, Thread: rc.discussion, ReviewID: rc.reviewID, ReviewState: "commented",
		Author: forge.User{ID: rc.author.id, Login: rc.author.login}, Body: rc.body, CreatedAt: rc.created,
		Resolved: rc.resolved,
	}
	if rc.resolved && rc.resolvedBy != nil {
		out.ResolvedBy = rc.resolvedBy.login
	}
	if rc.pos != nil {
		p := *rc.pos
		out.Position = &p
	}
	if m.sharedNumbers {
		out.DiffHunk = rc.hunk
		if rc.pos != nil {
			out.Thread = rc.pos.Key()
		}
		for _, rv := range mi.reviews {
			if rv.id == rc.reviewID {
				out.ReviewState = map[string]string{"APPROVED": "approved", "REQUEST_CHANGES": "changes_requested"}[rv.state]
				out.ReviewState = cmp.Or(out.ReviewState, "commented")
			}
		}
	}
	return out
}

// Reviews returns the Forgejo reviews of merge request number (review requests included) as
// (author, state, body), oldest first; GitLab keeps none.
func (m *model) Reviews(repo string, number int64) [][3]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	mi := m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true})
	var out [][3]string
	for _, rv := range mi.reviews {
		out = append(out, [3]string{rv.author.login, rv.state, rv.body})
	}
	return out
}

func (mi *modelIssue) reviewLocked(id int64) *modelReview {
	for _, rv := range mi.reviews {
		if rv.id == id {
			return rv
		}
	}
	return nil
}

// AddThreadReply adds login's reply (login added if needed) to a review thread of merge
// request number (a GitLab discussion id, or a Forgejo path and line key) and returns its id.
// On GitLab a reply in a resolved discussion is resolved in its author's name, as GitLab does.
func (m *model) AddThreadReply(repo string, number int64, thread, login, body string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	mi := m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true})
	u := m.userOrNewLocked(login)
	var first *modelReviewComment
	for _, rc := range mi.threadNotes {
		if rc.discussion == thread || (m.sharedNumbers && rc.pos != nil && rc.pos.Key() == thread) {
			first = rc
			break
		}
	}
	if first == nil {
		panic(fmt.Sprintf("forgetest: no thread %s on %s!%d", thread, repo, number))
	}
	return m.addThreadNoteLocked(mi, u, first.reviewID, first.discussion, first.pos, body).id
}

func (mi *modelIssue) discussionLocked(id string) []*modelReviewComment {
	var out []*modelReviewComment
	for _, rc := range mi.threadNotes {
		if rc.discussion == id {
			out = append(out, rc)
		}
	}
	return out
}
