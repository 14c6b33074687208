package gitlab

import (
	"slices"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// hookMergeStatus maps GitLab's detailed_merge_status (15.6+), else the deprecated
// merge_status, to a forge.MergeStatus. Only a conflict with the target (conflict, need_rebase;
// merge_status cannot_be_merged) reads as MergeStatusConflict; statuses that block a merge for
// another reason (ci_must_pass, not_approved, discussions_not_resolved, draft_status, …) read as
// MergeStatusMergeable, since merging the target would not change them. broken_status is a
// conflict when merge_status says cannot_be_merged, else unknown: until GitLab 16.10 it was
// also what a conflict reported, before the conflict check could (a merge request is "broken"
// when it has no commits, its source branch is gone, or it cannot be merged;
// gitlab-org/gitlab!142904, !146937).
func hookMergeStatus(detailed, legacy string) forge.MergeStatus {
	switch detailed {
	case "":
	case "unchecked", "checking", "approvals_syncing", "preparing":
		return forge.MergeStatusChecking
	case "conflict", "need_rebase":
		return forge.MergeStatusConflict
	case "broken_status":
		if legacy == "cannot_be_merged" {
			return forge.MergeStatusConflict
		}
		return forge.MergeStatusUnknown
	case "not_open":
		return forge.MergeStatusUnknown
	default:
		return forge.MergeStatusMergeable
	}
	switch legacy {
	case "can_be_merged":
		return forge.MergeStatusMergeable
	case "cannot_be_merged":
		return forge.MergeStatusConflict
	case "unchecked", "checking", "cannot_be_merged_recheck":
		return forge.MergeStatusChecking
	}
	return forge.MergeStatusUnknown
}

// hookNotePosition is the diff position of a DiffNote, nil for any other note type.
func hookNotePosition(noteType string, p *gl.NotePosition) *forge.Position {
	if noteType != "DiffNote" || p == nil {
		return nil
	}
	return clientPosition(p)
}

// clientPosition converts a GitLab note position; the path is the new path, falling back to
// the old one for a deleted file.
func clientPosition(p *gl.NotePosition) *forge.Position {
	if p == nil || (p.NewPath == "" && p.OldPath == "") {
		return nil
	}
	out := &forge.Position{Path: p.NewPath, NewLine: int(p.NewLine), OldLine: int(p.OldLine)}
	if out.Path == "" {
		out.Path = p.OldPath
	}
	if p.OldPath != "" && p.OldPath != out.Path {
		out.OldPath = p.OldPath
	}
	return out
}

// hookMergeRequestUpdate classifies a merge request "update" that changed neither commits,
// labels nor assignees: reviewers added (EventReviewRequested with the added logins), changes
// requested by a reviewer (detailed_merge_status requested_changes: EventReview), or a conflict
// with the target (EventMergeStatus); anything else is ignored.
func hookMergeRequestUpdate(ev forge.Event, body []byte, e *gl.MergeEvent) (forge.Event, error) {
	added := hookAddedReviewers(e)
	switch {
	case len(added) > 0:
		ev.Type, ev.ReviewRequested = forge.EventReviewRequested, added
		return ev, nil
	case e.ObjectAttributes.DetailedMergeStatus == "requested_changes" && !hookNotAReviewer(e, ev.Sender.Login):
		// A reviewer submitted a review that requests changes (GitLab 17.x reviews): the
		// comments come as Note Hooks; the review itself only shows in the merge status,
		// which stays so through every later update. An update by someone the delivery's
		// reviewers list leaves out (a milestone set, a title edited) is not a review.
		ev.Type, ev.Review = forge.EventReview, &forge.Review{State: "changes_requested"}
		return ev, nil
	case ev.MergeRequest != nil && ev.MergeRequest.MergeStatus == forge.MergeStatusConflict:
		ev.Type = forge.EventMergeStatus
		return ev, nil
	}
	return ev, forge.Ignore(ev.Header, "merge request update changes nothing Alfred uses (changed: %s)", hookChangedKeys(body))
}

// hookAddedReviewers returns the reviewers an update added (changes.reviewers current, less
// previous), nil when none.
func hookAddedReviewers(e *gl.MergeEvent) []string {
	prev := hookUserLogins(e.Changes.Reviewers.Previous)
	var added []string
	for _, login := range hookUserLogins(e.Changes.Reviewers.Current) {
		if !slices.ContainsFunc(prev, func(p string) bool { return strings.EqualFold(p, login) }) {
			added = append(added, login)
		}
	}
	return added
}

// hookNotAReviewer reports whether a merge request delivery lists its reviewers (GitLab leaves
// the key out when there are none) and login is not among them.
func hookNotAReviewer(e *gl.MergeEvent, login string) bool {
	if e.Reviewers == nil {
		return false // no list to tell by
	}
	return !slices.ContainsFunc(hookUserLogins(e.Reviewers), func(r string) bool { return strings.EqualFold(r, login) })
}
