package mailbox

import (
	"context"
	"errors"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// errNoMerger is returned by a guarded forge whose client has no merge calls.
var errNoMerger = errors.New("the forge client has no merge calls")

// MergeChecks implements forge.Merger: a read, passed through.
func (g *guardedReviews) MergeChecks(ctx context.Context, repo string, number int64) (*forge.MergeChecks, error) {
	mg, ok := g.rv.(forge.Merger)
	if !ok {
		return nil, errNoMerger
	}
	return mg.MergeChecks(ctx, repo, number)
}

// Merge implements forge.Merger. It posts no text, so a refusal is the forge's error as it is
// (not ErrPostRefused): the machine reports it and the mailbox stays in review.
func (g *guardedReviews) Merge(ctx context.Context, repo string, number int64, opt forge.MergeOptions) error {
	mg, ok := g.rv.(forge.Merger)
	if !ok {
		return errNoMerger
	}
	return mg.Merge(ctx, repo, number, opt)
}
