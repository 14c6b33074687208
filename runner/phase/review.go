package phase

import (
	"fmt"
	"strings"
)

// ThreadComment is one comment of a merge request's review threads, as a review_fix run gets
// it. Line is a line of the new file and OldLine one of the old file (0 when not on that side;
// both 0 for a general comment without a place in the diff).
type ThreadComment struct {
	ID     int64  `json:"id"`
	Thread string `json:"thread,omitempty"`
	Author string `json:"author"`
	// ReviewState is the verdict of the review the comment belongs to: "changes_requested",
	// "commented" or "" for a comment outside a review.
	ReviewState string `json:"review_state,omitempty"`
	Path        string `json:"path,omitempty"`
	Line        int    `json:"line,omitempty"`
	OldLine     int    `json:"old_line,omitempty"`
	// DiffHunk is the part of the diff the comment is about, when the forge gives it.
	DiffHunk string `json:"diff_hunk,omitempty"`
	Body     string `json:"body"`
}

// ReviewInput is the merge request side of a review_fix or review run.
type ReviewInput struct {
	// MergeRequest is the merge request number; Author its author's login.
	MergeRequest int64  `json:"merge_request"`
	Author       string `json:"author,omitempty"`
	Title        string `json:"title,omitempty"`
	Description  string `json:"description,omitempty"`
	// Target is the target branch; BaseSHA the merge base the diff starts from and HeadSHA the
	// head it ends at.
	Target  string `json:"target,omitempty"`
	BaseSHA string `json:"base_sha,omitempty"`
	HeadSHA string `json:"head_sha,omitempty"`
	// SinceSHA is the head of the bot's previous review when a review run covers only what
	// changed since (the diff then starts there), "" for a first review.
	SinceSHA string `json:"since_sha,omitempty"`
	// Diff is the unified diff from BaseSHA (or SinceSHA) to HeadSHA, cut at a size bound.
	Diff string `json:"diff"`
	// Comments are the comments a review_fix run addresses, oldest first.
	Comments []ThreadComment `json:"comments,omitempty"`
}

// ConflictFile is one file git could not merge, with the conflict markers git wrote.
type ConflictFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// ConflictInput is what a conflict_resolution run gets: git stopped while merging Target into
// the branch; the worktree holds the files with markers, the merge is in progress.
type ConflictInput struct {
	Target string         `json:"target"`
	Files  []ConflictFile `json:"files"`
	// Ours and Theirs are the commit messages on the branch and on the target since the merge
	// base, oldest first.
	Ours   []string `json:"ours,omitempty"`
	Theirs []string `json:"theirs,omitempty"`
}

// Verdicts of a review run (Result.ReviewVerdict).
const (
	VerdictApprove        = "approve"
	VerdictRequestChanges = "request_changes"
)

// Outcome values of a CommentOutcome.
const (
	// OutcomeFixed: the change the comment asks for is in this run's commit.
	OutcomeFixed = "fixed"
	// OutcomeAnswered: the comment is answered by Reply with no code change (a question).
	OutcomeAnswered = "answered"
	// OutcomeDeclined: not done, for Reason.
	OutcomeDeclined = "declined"
)

// CommentOutcome is what a review_fix run did about one comment: ID names the comment, Reply is
// posted in its thread (for fixed, optional: Alfred names the commit; for answered, required),
// Reason says why a declined comment was not done.
type CommentOutcome struct {
	ID      int64  `json:"id"`
	Outcome string `json:"outcome"`
	Reply   string `json:"reply,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// ReviewNote is one inline comment of a review run, at Path and Line of the new file (or
// OldLine of the old one, for a removed line).
type ReviewNote struct {
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	OldLine int    `json:"old_line,omitempty"`
	Body    string `json:"body"`
}

// Fixed reports whether any outcome is OutcomeFixed.
func (r *Result) Fixed() bool {
	for _, c := range r.Comments {
		if c.Outcome == OutcomeFixed {
			return true
		}
	}
	return false
}

func validateOutcomes(in Input, r *Result) []error {
	var errs []error
	want := map[int64]bool{}
	if in.Review != nil {
		for _, c := range in.Review.Comments {
			want[c.ID] = true
		}
	}
	seen := map[int64]bool{}
	for i, c := range r.Comments {
		name := fmt.Sprintf("comments[%d]", i)
		switch {
		case !want[c.ID]:
			errs = append(errs, fmt.Errorf("%s: id %d is not a comment of this run", name, c.ID))
		case seen[c.ID]:
			errs = append(errs, fmt.Errorf("%s: second outcome for comment %d", name, c.ID))
		}
		seen[c.ID] = true
		switch c.Outcome {
		case OutcomeFixed:
		case OutcomeAnswered:
			if strings.TrimSpace(c.Reply) == "" {
				errs = append(errs, fmt.Errorf("%s: an answered comment needs a reply", name))
			}
		case OutcomeDeclined:
			if strings.TrimSpace(c.Reason) == "" {
				errs = append(errs, fmt.Errorf("%s: a declined comment needs a reason", name))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: outcome %q is not fixed, answered or declined", name, c.Outcome))
		}
	}
	for id := range want {
		if !seen[id] {
			errs = append(errs, fmt.Errorf("review_fix: comment %d has no outcome", id))
		}
	}
	if r.Fixed() && strings.TrimSpace(r.CommitMessage) == "" {
		errs = append(errs, fmt.Errorf("review_fix: %q is required when a comment is fixed", "commit_message"))
	}
	return errs
}

func validateReviewNotes(notes []ReviewNote) []error {
	var errs []error
	for i, n := range notes {
		name := fmt.Sprintf("review_comments[%d]", i)
		if strings.TrimSpace(n.Path) == "" || strings.HasPrefix(n.Path, "/") || strings.Contains(n.Path, "..") {
			errs = append(errs, fmt.Errorf("%s: path %q is not a relative path in the repository", name, n.Path))
		}
		if n.Line <= 0 && n.OldLine <= 0 {
			errs = append(errs, fmt.Errorf("%s: line or old_line is required", name))
		}
		if strings.TrimSpace(n.Body) == "" {
			errs = append(errs, fmt.Errorf("%s: body is required", name))
		}
	}
	return errs
}
