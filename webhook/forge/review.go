package forge

import (
	"context"
	"fmt"
	"time"
)

// MergeStatus is the normalised mergeability of a merge request: whether its source branch
// merges into the target without conflict. Other reasons a forge blocks a merge (CI, approvals,
// open discussions, draft) are not conflicts and read as MergeStatusMergeable.
type MergeStatus string

const (
	// MergeStatusUnknown: the payload or answer does not say.
	MergeStatusUnknown MergeStatus = ""
	// MergeStatusChecking: the forge is still computing (GitLab unchecked, checking,
	// cannot_be_merged_recheck, approvals_syncing).
	MergeStatusChecking MergeStatus = "checking"
	// MergeStatusMergeable: no conflict with the target branch.
	MergeStatusMergeable MergeStatus = "mergeable"
	// MergeStatusConflict: the source branch conflicts with the target (GitLab conflict or
	// has_conflicts, need_rebase; Forgejo/Gitea mergeable: false). Forgejo/Gitea also answer
	// false while a check runs right after a push, so a Forgejo conflict is only certain when a
	// later read says it again.
	MergeStatusConflict MergeStatus = "conflict"
)

// Position is a place in a merge request's diff. NewLine is a line of the new file and OldLine
// one of the old file (1-based; 0 when the comment is not on that side): a comment on an added
// line has only NewLine, on a removed line only OldLine, on an unchanged line both (GitLab) or
// NewLine (Forgejo). Path is the new path; OldPath differs for a renamed file.
type Position struct {
	Path    string `json:"path"`
	OldPath string `json:"old_path,omitempty"`
	NewLine int    `json:"new_line,omitempty"`
	OldLine int    `json:"old_line,omitempty"`
}

// Key names the place of p: "<path>:+<new line>", or "<path>:-<old line>" for a line of the
// old file only. Forgejo/Gitea thread code comments by this place (ReviewComment.Thread).
func (p Position) Key() string {
	if p.NewLine > 0 {
		return fmt.Sprintf("%s:+%d", p.Path, p.NewLine)
	}
	return fmt.Sprintf("%s:-%d", p.Path, p.OldLine)
}

// ReviewComment is one comment in a merge request's review threads, as Reviews.ReviewComments
// lists it.
type ReviewComment struct {
	// ID is the comment's id (GitLab note id, Forgejo comment id; one id sequence with the
	// conversation comments on Forgejo).
	ID int64 `json:"id"`
	// Thread identifies the conversation: GitLab the discussion id; Forgejo, whose web UI
	// threads code comments by path and line, "<path>:+<new line>" or "<path>:-<old line>", and
	// "review:<id>" for a review's summary.
	Thread string `json:"thread"`
	// ReviewID is the Forgejo review the comment belongs to, 0 on GitLab.
	ReviewID int64 `json:"review_id,omitempty"`
	// ReviewState is the state of the review that carries the comment (Forgejo: the review's
	// state, "changes_requested" or "commented"; GitLab: "commented").
	ReviewState string    `json:"review_state,omitempty"`
	Author      User      `json:"author"`
	Body        string    `json:"body"`
	CreatedAt   time.Time `json:"created_at"`
	// Position is where the comment sits in the diff, nil for a general comment (a GitLab
	// discussion without position, a Forgejo review summary).
	Position *Position `json:"position,omitempty"`
	// DiffHunk is the part of the diff the comment is about, ending at its line, when the forge
	// gives it (Forgejo diff_hunk); "" otherwise.
	DiffHunk string `json:"diff_hunk,omitempty"`
	// Resolved reports a resolved thread (GitLab resolved, Forgejo resolver set).
	Resolved bool `json:"resolved,omitempty"`
	// ResolvedBy is the login of who resolved it (GitLab resolved_by, Forgejo resolver), ""
	// when it is not resolved. GitLab resolves a reply written in a resolved discussion in its
	// author's name (Notes::BuildService), so a thread's resolver is its first comment's.
	ResolvedBy string `json:"resolved_by,omitempty"`
}

// ReviewEvent is the verdict a posted review carries.
type ReviewEvent string

const (
	// ReviewCommentOnly is a review that neither approves nor requests changes (the default).
	ReviewCommentOnly ReviewEvent = "comment"
	// ReviewApprove approves the merge request.
	ReviewApprove ReviewEvent = "approve"
	// ReviewRequestChanges requests changes.
	ReviewRequestChanges ReviewEvent = "request_changes"
)

// NewReview is the input of Reviews.PostReview: a summary and inline comments on the diff of
// HeadSHA (the head the review read; "" means the merge request's current head).
type NewReview struct {
	Body     string
	Event    ReviewEvent // "" is ReviewCommentOnly
	HeadSHA  string
	Comments []NewReviewComment
}

// NewReviewComment is one inline comment of a NewReview, at Position (NewLine for an added or
// unchanged line, OldLine for a removed one).
type NewReviewComment struct {
	Position Position
	Body     string
}

// Reviews is the outbound API of the review loop, implemented by both forge clients beside
// Forge. It has the same error contract as Forge (ErrNotFound, ErrForbidden, ErrConflict,
// retries on 429, and on 5xx for reads and state-setting writes).
type Reviews interface {
	// ReviewComments lists the comments of merge request number's review threads, oldest first:
	// GitLab every note of every discussion that is not a system note (diff notes with their
	// position, general discussion notes); Forgejo every comment of every submitted review
	// (GET …/pulls/{n}/reviews, then …/reviews/{id}/comments; REQUEST_REVIEW rows are skipped),
	// and each review's non-empty body as a comment without position, with the id of the
	// review's summary comment.
	ReviewComments(ctx context.Context, repo string, number int64) ([]ReviewComment, error)
	// Reply answers comment to in its thread and returns the new comment's id: GitLab a note in
	// the discussion; Forgejo a comment added to to's review at the same path and line (POST
	// …/reviews/{id}/comments), or, where the server lacks that call (Gitea), a new comment-only
	// review with one inline comment at that path and line, which the web UI shows in the same
	// conversation. A comment without position is answered with a merge request comment.
	Reply(ctx context.Context, repo string, number int64, to ReviewComment, body string) (int64, error)
	// ResolveThread marks a thread resolved (GitLab: PUT discussions/{id}?resolved=true).
	// Forgejo/Gitea have no such call in their API; there it does nothing and returns nil.
	ResolveThread(ctx context.Context, repo string, number int64, thread string) error
	// PostReview submits one review and returns its id: Forgejo/Gitea one review with inline
	// comments (POST …/pulls/{n}/reviews); GitLab a note with the body and one discussion with a
	// position per comment (and an approval for ReviewApprove). ErrConflict for a comment
	// without path or line, and where the forge checks it (GitLab, Forgejo) for a line outside
	// the diff.
	PostReview(ctx context.Context, repo string, number int64, r NewReview) (int64, error)
}
