package forgetest

import (
	"context"
	"fmt"

	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ forge.Reviews = (*Fake)(nil)

// ReviewComments lists the inline comments and thread replies, oldest first, the way the GitLab
// client does: Thread is the discussion id. Review bodies are merge request comments (see
// Comments).
func (f *Fake) ReviewComments(ctx context.Context, repo string, number int64) (out []forge.ReviewComment, err error) {
	ref := forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
	err = f.withIssue(ctx, "ReviewComments", ref, nil, func(mi *modelIssue) error {
		for _, rc := range mi.threadNotes {
			out = append(out, f.reviewCommentLocked(mi, rc))
		}
		return nil
	})
	return out, err
}

// Reply adds the bot's note to to's thread, or a merge request comment when to has no thread;
// ErrNotFound for an unknown thread.
func (f *Fake) Reply(ctx context.Context, repo string, number int64, to forge.ReviewComment, body string) (id int64, err error) {
	if to.Thread == "" {
		return f.Comment(ctx, forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}, body)
	}
	ref := forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
	err = f.withIssue(ctx, "Reply", ref, []string{to.Thread, body}, func(mi *modelIssue) error {
		thread := mi.discussionLocked(to.Thread)
		if len(thread) == 0 {
			return fakeNotFound("discussion %s of %s", to.Thread, ref)
		}
		id = f.addThreadNoteLocked(mi, f.userLocked(BotLogin), 0, to.Thread, thread[0].pos, body).id
		return nil
	})
	return id, err
}

// ResolveThread marks every note of the thread resolved; ErrNotFound for an unknown thread.
func (f *Fake) ResolveThread(ctx context.Context, repo string, number int64, thread string) error {
	ref := forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
	return f.withIssue(ctx, "ResolveThread", ref, []string{thread}, func(mi *modelIssue) error {
		notes := mi.discussionLocked(thread)
		if len(notes) == 0 {
			return fakeNotFound("discussion %s of %s", thread, ref)
		}
		for _, rc := range notes {
			rc.resolved, rc.resolvedBy = true, f.userLocked(BotLogin)
		}
		return nil
	})
}

// PostReview posts the body as a merge request comment and one discussion per inline comment,
// by the bot; a comment without a path or line is ErrConflict. It returns the body comment's id
// (0 without a body).
func (f *Fake) PostReview(ctx context.Context, repo string, number int64, r forge.NewReview) (id int64, err error) {
	ref := forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
	err = f.withIssue(ctx, "PostReview", ref, []string{r.Body, string(r.Event)}, func(mi *modelIssue) error {
		var seed []SeedReviewComment
		for _, c := range r.Comments {
			if c.Position.Path == "" || (c.Position.NewLine <= 0 && c.Position.OldLine <= 0) {
				return fmt.Errorf("fake forge: review comment without path or line: %w", forge.ErrConflict)
			}
			seed = append(seed, SeedReviewComment{Path: c.Position.Path, NewLine: c.Position.NewLine, OldLine: c.Position.OldLine, Body: c.Body})
		}
		before := len(mi.comments)
		f.addReviewLocked(mi, f.userLocked(BotLogin), "COMMENT", r.Body, r.HeadSHA, seed)
		if len(mi.comments) > before {
			id = mi.comments[len(mi.comments)-1].id
		}
		return nil
	})
	return id, err
}
