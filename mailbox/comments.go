package mailbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// issueExists reports whether the forge still has the issue (or merge request): a 404 on
// something else (one of its comments, a pipeline) is then that thing's alone (post, orClose).
// An error other than a 404 counts as existing, so that a forge outage never closes a mailbox.
func (m *Machine) issueExists(ctx context.Context, bot Bot, ref forge.IssueRef) bool {
	var err error
	if ref.MergeRequest {
		_, err = bot.Forge.MergeRequest(ctx, ref.Repo, ref.Number)
	} else {
		_, err = bot.Forge.Issue(ctx, ref)
	}
	if !errors.Is(err, forge.ErrNotFound) {
		return true
	}
	// Both forges answer 404 for a repository the token cannot see: the issue is gone only
	// when its repository can still be read.
	_, err = bot.Forge.Repository(ctx, ref.Repo)
	return err != nil
}

// post creates or edits the comment with the given key (see markers.go). A row with comment
// id 0 is written before posting; if the process dies between the post and recording its id,
// the next attempt finds the comment by its hidden marker instead of posting it again. A
// comment whose text did not change is not edited. A comment a person deleted (the edit is a
// 404 while the issue is there) is posted again, as new.
func (m *Machine) post(ctx context.Context, bot Bot, mb *Mailbox, key, kind, body string) error {
	// As the post guard sends it (GuardPosts; guarding twice changes nothing): the hash
	// recorded is that of the body the forge holds, which a reconciliation compares.
	full := guardText(bot.Forge.Kind(), bot.IsBot, Marker(key, kind)+"\n"+m.cfg.Redact(body))
	hash := bodyHash(full)
	ref := mb.Ref()
	pc, err := m.store.PostedComment(ctx, mb.ID, key)
	if err != nil {
		return err
	}
	if pc != nil && pc.CommentID < 0 && !m.settings(mb.Repo).Shadow {
		// Posted in shadow mode (a synthetic id): the forge has no such comment, and the
		// project is live now, so the comment is posted as new; the shadow history is not
		// replayed.
		pc = nil
	}
	if pc != nil && pc.CommentID == 0 {
		cs, err := bot.Forge.Comments(ctx, ref)
		if err != nil {
			return fmt.Errorf("list comments: %w", err)
		}
		for _, c := range cs {
			if k, _, ok := ParseMarker(c.Body); ok && k == key && strings.EqualFold(c.Author.Login, bot.Login) {
				pc.CommentID, pc.BodyHash = c.ID, bodyHash(c.Body)
				break
			}
		}
	}
	if pc != nil && pc.CommentID != 0 {
		if pc.BodyHash != hash {
			// Both bodies are Alfred's while the edit is on its way (PostedComment.Wrote).
			inFlight := *pc
			inFlight.BodyHash = strings.TrimSpace(pc.BodyHash + " " + hash)
			if err := m.store.RecordComment(ctx, inFlight); err != nil {
				return err
			}
			err := bot.Forge.EditComment(ctx, ref, pc.CommentID, full)
			if err == nil {
				pc.BodyHash = hash
				return m.store.RecordComment(ctx, *pc)
			}
			if !errors.Is(err, forge.ErrNotFound) || !m.issueExists(ctx, bot, ref) {
				return fmt.Errorf("edit comment %s: %w", key, err)
			}
			// Someone deleted the comment, not the issue: it is posted again, below.
			m.log.Info("a comment of Alfred's was deleted; posting it again", "mailbox_id", mb.ID, "key", key)
		} else {
			pc.BodyHash = hash
			return m.store.RecordComment(ctx, *pc)
		}
	}
	// The intent, with the body it posts: a reconciliation that reads the comment before the
	// forge has answered knows it for Alfred's.
	if err := m.store.RecordComment(ctx, PostedComment{MailboxID: mb.ID, Key: key, Kind: kind, BodyHash: hash}); err != nil {
		return err
	}
	id, err := bot.Forge.Comment(ctx, ref, full)
	if err != nil {
		return fmt.Errorf("post comment %s: %w", key, err)
	}
	return m.store.RecordComment(ctx, PostedComment{MailboxID: mb.ID, Key: key, Kind: kind, CommentID: id, BodyHash: hash})
}
