package mailbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// post creates or edits the comment with the given key (see markers.go). A row with comment
// id 0 is written before posting; if the process dies between the post and recording its id,
// the next attempt finds the comment by its hidden marker instead of posting it again. A
// comment whose text did not change is not edited.
func (m *Machine) post(ctx context.Context, bot Bot, mb *Mailbox, key, kind, body string) error {
	full := Marker(key, kind) + "\n" + m.cfg.Redact(body)
	sum := sha256.Sum256([]byte(full))
	hash := hex.EncodeToString(sum[:])
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
				pc.CommentID, pc.BodyHash = c.ID, ""
				if c.Body == full {
					pc.BodyHash = hash
				}
				break
			}
		}
	}
	if pc != nil && pc.CommentID != 0 {
		if pc.BodyHash != hash {
			if err := bot.Forge.EditComment(ctx, ref, pc.CommentID, full); err != nil {
				return fmt.Errorf("edit comment %s: %w", key, err)
			}
		}
		pc.BodyHash = hash
		return m.store.RecordComment(ctx, *pc)
	}
	if err := m.store.RecordComment(ctx, PostedComment{MailboxID: mb.ID, Key: key, Kind: kind}); err != nil {
		return err
	}
	id, err := bot.Forge.Comment(ctx, ref, full)
	if err != nil {
		return fmt.Errorf("post comment %s: %w", key, err)
	}
	return m.store.RecordComment(ctx, PostedComment{MailboxID: mb.ID, Key: key, Kind: kind, CommentID: id, BodyHash: hash})
}
