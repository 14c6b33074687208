package script

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alfred-bot/alfred/runner/phase"
)

// ReviewLoop holds the script keys of the review loop's phases; see the package documentation.
type ReviewLoop struct {
	// CommentRules give each comment of a review_fix run (Input.Review.Comments) its outcome:
	// the first rule whose Match is a case-insensitive substring of the comment's body.
	// A comment no rule matches gets no outcome (so the result is refused).
	CommentRules []CommentRule `json:"comment_rules,omitempty"`
	// ResolveConflicts settles the conflict markers of every file in Input.Conflict.Files:
	// "ours" keeps the branch's side, "theirs" the target's, "both" ours then theirs. Empty
	// leaves the markers (so Alfred refuses the result).
	ResolveConflicts string `json:"resolve_conflicts,omitempty"`
}

// CommentRule is one entry of ReviewLoop.CommentRules; Outcome, Reply and Reason are those of
// phase.CommentOutcome.
type CommentRule struct {
	Match   string `json:"match"`
	Outcome string `json:"outcome"`
	Reply   string `json:"reply,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// apply plays the review-loop keys: the outcomes of comment_rules are appended to the result's
// comments, and resolve_conflicts rewrites the conflicted files under workspace.
func (st *Step) apply(in *phase.Input, workspace string, stdout io.Writer) error {
	if len(st.CommentRules) > 0 && in.Review != nil {
		for _, c := range in.Review.Comments {
			for _, r := range st.CommentRules {
				if strings.Contains(strings.ToLower(c.Body), strings.ToLower(r.Match)) {
					st.Comments = append(st.Comments, phase.CommentOutcome{ID: c.ID, Outcome: r.Outcome, Reply: r.Reply, Reason: r.Reason})
					fmt.Fprintf(stdout, "comment %d: %s\n", c.ID, r.Outcome)
					break
				}
			}
		}
	}
	if st.ResolveConflicts == "" || in.Conflict == nil {
		return nil
	}
	for _, f := range in.Conflict.Files {
		clean, err := CleanPath(f.Path)
		if err != nil {
			return err
		}
		target := filepath.Join(workspace, filepath.FromSlash(clean))
		b, err := os.ReadFile(target)
		if err != nil {
			return fmt.Errorf("read conflicted %s: %w", clean, err)
		}
		out, err := Resolve(string(b), st.ResolveConflicts)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", clean, err)
		}
		if err := os.WriteFile(target, []byte(out), 0o644); err != nil {
			return fmt.Errorf("write resolved %s: %w", clean, err)
		}
		fmt.Fprintf(stdout, "resolved %s (%s)\n", clean, st.ResolveConflicts)
	}
	return nil
}

// Resolve replaces every conflict block of content (git's "<<<<<<< ", optional "||||||| "
// base, "=======", ">>>>>>> " lines) by its ours side, its theirs side, or both (ours then
// theirs). Errors: an unknown side, or a block that is not closed.
func Resolve(content, side string) (string, error) {
	if side != "ours" && side != "theirs" && side != "both" {
		return "", fmt.Errorf("resolve_conflicts %q is not ours, theirs or both", side)
	}
	var out, ours, theirs []string
	state := 0 // 0 outside, 1 ours, 2 base, 3 theirs
	lines := strings.SplitAfter(content, "\n")
	for _, l := range lines {
		bare := strings.TrimRight(l, "\r\n")
		switch {
		case state == 0 && strings.HasPrefix(bare, "<<<<<<<"):
			state, ours, theirs = 1, nil, nil
		case state == 1 && strings.HasPrefix(bare, "|||||||"):
			state = 2
		case (state == 1 || state == 2) && bare == "=======":
			state = 3
		case state == 3 && strings.HasPrefix(bare, ">>>>>>>"):
			if side != "theirs" {
				out = append(out, ours...)
			}
			if side != "ours" {
				out = append(out, theirs...)
			}
			state = 0
		case state == 1:
			ours = append(ours, l)
		case state == 3:
			theirs = append(theirs, l)
		case state == 0:
			out = append(out, l)
		}
	}
	if state != 0 {
		return "", fmt.Errorf("a conflict block is not closed")
	}
	return strings.Join(out, ""), nil
}
