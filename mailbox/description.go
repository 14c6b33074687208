package mailbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// ErrDescriptionTooLong is what the guarded forge (GuardPosts) returns for an issue
// description over its MaxDescriptionBytes: nothing is sent, since shortening it would cut the
// human's text. The mailbox then writes its section elsewhere (writeSection).
var ErrDescriptionTooLong = errors.New("mailbox: the description would be longer than the forge accepts")

// sectionPlace says where writeSection put a section.
type sectionPlace int

const (
	// inDescription: the section is in the issue description.
	inDescription sectionPlace = iota
	// inComment: the section is a comment of its own; the description points to it, or holds
	// nothing of Alfred's when even the pointer does not fit.
	inComment
)

// sectionKey is the comment key of a section that did not fit in the description. It names
// the section only, so every later version edits the same comment.
func sectionKey(name string) string { return "section-" + name }

// writeSection writes content as the named section of the issue description (SetSection),
// never shortening or changing the human's text around it. When the description with the
// section is longer than the forge accepts (ErrDescriptionTooLong from the guard, or the
// forge's own 4xx refusal), the section goes into a comment of its own, edited in place under
// its marker, and the description gets a pointer to it in the section's place, or nothing at
// all when even that does not fit. A section comment left from an earlier, longer version
// says so once the section is back in the description. title names the section for humans.
func (m *Machine) writeSection(ctx context.Context, bot Bot, mb *Mailbox, issue *forge.Issue, name, title, content string) (sectionPlace, error) {
	body := SetSection(issue.Body, name, content)
	err := setBody(ctx, bot, mb, issue.Body, body)
	if err == nil {
		pc, perr := m.store.PostedComment(ctx, mb.ID, sectionKey(name))
		if perr != nil || pc == nil {
			return inDescription, perr
		}
		return inDescription, m.post(ctx, bot, mb, sectionKey(name), "section",
			fmt.Sprintf("*(The **%s** is in the issue description now.)*", title))
	}
	if !tooLong(err) {
		return inDescription, err
	}
	m.log.Info("the section does not fit in the description; writing it as a comment",
		"mailbox_id", mb.ID, "section", name, "bytes", len(body))
	if err := m.post(ctx, bot, mb, sectionKey(name), "section", content); err != nil {
		return inComment, err
	}
	where := "a comment of its own below"
	if pc, err := m.store.PostedComment(ctx, mb.ID, sectionKey(name)); err == nil && pc != nil && pc.CommentID > 0 && issue.WebURL != "" {
		where = fmt.Sprintf("[this comment](%s)", commentURL(bot.Forge.Kind(), issue.WebURL, pc.CommentID))
	}
	pointer := fmt.Sprintf("*(The **%s** is longer than this description can hold: it is in %s.)*", title, where)
	err = setBody(ctx, bot, mb, issue.Body, SetSection(issue.Body, name, pointer))
	if err != nil && !tooLong(err) {
		return inComment, err
	}
	return inComment, nil // when even the pointer does not fit, the description stays as the human left it
}

// setBody writes body as the issue description unless it is the description already.
func setBody(ctx context.Context, bot Bot, mb *Mailbox, current, body string) error {
	if body == current {
		return nil
	}
	return bot.Forge.SetIssueBody(ctx, mb.Ref(), body)
}

// tooLong reports whether a description write failed for its length: the guard's limit, or a
// forge refusing it with a 4xx other than 403 and 409 (GitLab answers 400 "is too long").
func tooLong(err error) bool {
	return errors.Is(err, ErrDescriptionTooLong) || errors.Is(err, forge.ErrRefused)
}

// commentURL is the address of comment id on the issue at issueURL: GitLab's "#note_<id>",
// Forgejo's and Gitea's "#issuecomment-<id>".
func commentURL(kind forge.Kind, issueURL string, id int64) string {
	anchor := "issuecomment-"
	if kind == forge.KindGitLab {
		anchor = "note_"
	}
	return fmt.Sprintf("%s#%s%d", strings.TrimRight(issueURL, "#"), anchor, id)
}
