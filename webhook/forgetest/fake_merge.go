package forgetest

import (
	"context"
	"fmt"
	"net/http"

	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ forge.Merger = (*Fake)(nil)

// MergeChecks reports the approvals and open threads the way the GitLab client does (Thread is
// the discussion id).
func (f *Fake) MergeChecks(ctx context.Context, repo string, number int64) (out *forge.MergeChecks, err error) {
	ref := forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
	err = f.withIssue(ctx, "MergeChecks", ref, nil, func(mi *modelIssue) error {
		out = f.mergeChecksLocked(f.repoLocked(repo), mi)
		return nil
	})
	return out, err
}

// Merge merges the merge request as the forge's merge API does; a refusal wraps the sentinel of
// its status (see mergeLocked): ErrRefused for 405, ErrConflict for 409 and 422, ErrForbidden
// for 401.
func (f *Fake) Merge(ctx context.Context, repo string, number int64, opt forge.MergeOptions) error {
	ref := forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
	return f.withIssue(ctx, "Merge", ref, []string{string(opt.Method), opt.HeadSHA}, func(mi *modelIssue) error {
		status, msg := f.mergeLocked(f.repoLocked(repo), mi, opt)
		switch status {
		case 0:
			return nil
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("fake forge: merge %s: %s: %w", ref, msg, forge.ErrForbidden)
		case http.StatusConflict, http.StatusUnprocessableEntity:
			return fmt.Errorf("fake forge: merge %s: %s: %w", ref, msg, forge.ErrConflict)
		}
		return fmt.Errorf("fake forge: merge %s: %s: %w", ref, msg, forge.ErrRefused)
	})
}
