package web

import (
	"fmt"
	"strings"
	"time"
)

// ShadowPost is one write Alfred did not make because the project is in shadow mode
// (mailbox.ShadowWrite as the pages read it): what it would have posted or changed.
type ShadowPost struct {
	ID int64
	At time.Time
	// Kind is what the write would have done: comment, edit_comment, issue_body, labels,
	// ensure_labels, assignees, merge_request, review, reply, resolve, merge, or run (a run
	// shadow mode did not start).
	Kind string
	// CommentID is the comment created (negative: a synthetic id) or edited.
	CommentID int64
	// Body is the Markdown text the forge would have received, "" for a write without text.
	Body string
	// Add and Remove are the labels or assignees added and removed.
	Add, Remove []string
	// Detail is what else the write said (a merge request's title and branches, a review's
	// verdict and inline comments, a merge's method, a run's phase).
	Detail map[string]string
}

// Summary says in words what Alfred would have done.
func (p ShadowPost) Summary() string {
	list := func(ss []string) string { return strings.Join(ss, ", ") }
	change := func(noun, addVerb, removeVerb string) string {
		var parts []string
		if len(p.Add) > 0 {
			parts = append(parts, addVerb+" "+list(p.Add))
		}
		if len(p.Remove) > 0 {
			parts = append(parts, removeVerb+" "+list(p.Remove))
		}
		if len(parts) == 0 {
			return "would change no " + noun
		}
		return "would " + strings.Join(parts, " and ")
	}
	switch p.Kind {
	case "comment":
		return fmt.Sprintf("would post a comment (shadow id %d)", p.CommentID)
	case "edit_comment":
		if p.CommentID < 0 {
			return fmt.Sprintf("would edit its comment (shadow id %d) to read", p.CommentID)
		}
		return fmt.Sprintf("would edit comment %d to read", p.CommentID)
	case "issue_body":
		return "would write the issue description"
	case "labels":
		return change("label", "add the labels", "remove the labels")
	case "ensure_labels":
		return "would create the missing repository labels " + list(p.Add)
	case "assignees":
		return change("assignee", "assign", "unassign")
	case "merge_request":
		return fmt.Sprintf("would open a merge request from %s into %s: %s", p.Detail["source_branch"], p.Detail["target_branch"], p.Detail["title"])
	case "review":
		return "would post a review (" + p.Detail["event"] + ")"
	case "reply":
		return "would reply in thread " + p.Detail["thread"]
	case "resolve":
		return "would resolve thread " + p.Detail["thread"]
	case "merge":
		return "would merge the merge request (" + p.Detail["method"] + ")"
	case "run":
		return "would start the " + p.Detail["phase"] + " run; shadow mode starts no run that pushes"
	}
	return "would " + p.Kind
}
