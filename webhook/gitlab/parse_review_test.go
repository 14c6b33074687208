package gitlab

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestParseDiffNotePositionAndThread(t *testing.T) {
	t.Parallel()
	ev, err := srcParse(t, "Note Hook", srcFixture(t, "note_hook_diff_note_on_merge_request.json"))
	require.NoError(t, err)
	require.Equal(t, forge.EventComment, ev.Type)
	require.Equal(t, "e2d22c5e7bc2dda3d55f3ddc6d48b65326e2612b", ev.Comment.Thread)
	require.Equal(t, &forge.Position{Path: "README.md", NewLine: 1}, ev.Comment.Position)

	// A general note (the documented example) has no position; its merge request is still
	// being checked.
	ev, err = srcParse(t, "Note Hook", srcFixture(t, "gitlab-docs/note_hook_merge_request_comment.json"))
	require.NoError(t, err)
	require.Nil(t, ev.Comment.Position)
	require.Equal(t, forge.MergeStatusChecking, ev.MergeRequest.MergeStatus)
}

func TestParseMergeRequestMergeStatus(t *testing.T) {
	t.Parallel()
	ev, err := srcParse(t, "Merge Request Hook", srcFixture(t, "gitlab-docs/merge_request_hook_open.json"))
	require.NoError(t, err)
	require.Equal(t, forge.MergeStatusMergeable, ev.MergeRequest.MergeStatus)

	// GitLab's docs hold no conflict example: the reviewer-removed update (which changes
	// nothing else Alfred uses) with detailed_merge_status set to conflict stands in for it.
	conflict := srcPatch(t, srcFixture(t, "merge_request_hook_reviewer_removed.json"), func(m map[string]any) {
		m["object_attributes"].(map[string]any)["detailed_merge_status"] = "conflict"
	})
	ev, err = srcParse(t, "Merge Request Hook", conflict)
	require.NoError(t, err)
	require.Equal(t, forge.EventMergeStatus, ev.Type)
	require.Equal(t, forge.MergeStatusConflict, ev.MergeRequest.MergeStatus)

	for detailed, want := range map[string]forge.MergeStatus{
		"mergeable": forge.MergeStatusMergeable, "ci_must_pass": forge.MergeStatusMergeable,
		"checking": forge.MergeStatusChecking, "unchecked": forge.MergeStatusChecking,
		"conflict": forge.MergeStatusConflict, "need_rebase": forge.MergeStatusConflict,
	} {
		require.Equal(t, want, hookMergeStatus(detailed, ""), detailed)
	}
	require.Equal(t, forge.MergeStatusConflict, hookMergeStatus("", "cannot_be_merged"))
	// Before GitLab 16.10 a conflict read broken_status; merge_status tells it from a missing
	// branch or no commits.
	broken := srcPatch(t, srcFixture(t, "merge_request_hook_reviewer_removed.json"), func(m map[string]any) {
		oa := m["object_attributes"].(map[string]any)
		oa["detailed_merge_status"], oa["merge_status"] = "broken_status", "cannot_be_merged"
	})
	ev, err = srcParse(t, "Merge Request Hook", broken)
	require.NoError(t, err)
	require.Equal(t, forge.EventMergeStatus, ev.Type)
	require.Equal(t, forge.MergeStatusConflict, ev.MergeRequest.MergeStatus)
	require.Equal(t, forge.MergeStatusUnknown, hookMergeStatus("broken_status", "can_be_merged"), "a branch gone, no commits")
	require.Equal(t, forge.MergeStatusUnknown, hookMergeStatus("broken_status", ""))
	require.Equal(t, forge.MergeStatusUnknown, hookMergeStatus("", ""))
}

func TestParseReviewerAdded(t *testing.T) {
	t.Parallel()
	ev, err := srcParse(t, "Merge Request Hook", srcFixture(t, "merge_request_hook_reviewer_added.json"))
	require.NoError(t, err)
	require.Equal(t, forge.EventReviewRequested, ev.Type)
	require.Equal(t, []string{"real6543"}, ev.ReviewRequested)

	// Reviewers picked when the merge request is created come only in the top-level list.
	ev, err = srcParse(t, "Merge Request Hook", srcFixture(t, "gitlab-docs/merge_request_hook_open.json"))
	require.NoError(t, err)
	require.Equal(t, forge.EventMergeRequestOpened, ev.Type)
	require.Equal(t, []string{"user1"}, ev.ReviewRequested)
	// One change that adds an assignee and a reviewer (/assign me /assign_reviewer @x).
	both := srcPatch(t, srcFixture(t, "merge_request_hook_assignee_added.json"), func(m map[string]any) {
		m["changes"].(map[string]any)["reviewers"] = map[string]any{"previous": []any{},
			"current": []any{map[string]any{"id": 9, "username": "alfred"}}}
	})
	ev, err = srcParse(t, "Merge Request Hook", both)
	require.NoError(t, err)
	require.Equal(t, forge.EventAssignees, ev.Type)
	require.Equal(t, []string{"alfred"}, ev.ReviewRequested)

	_, err = srcParse(t, "Merge Request Hook", srcFixture(t, "merge_request_hook_reviewer_removed.json"))
	var ig *forge.IgnoreError
	require.ErrorAs(t, err, &ig)

	// A review that requests changes shows as the merge request's detailed_merge_status.
	requested := srcPatch(t, srcFixture(t, "merge_request_hook_reviewer_removed.json"), func(m map[string]any) {
		m["object_attributes"].(map[string]any)["detailed_merge_status"] = "requested_changes"
	})
	ev, err = srcParse(t, "Merge Request Hook", requested)
	require.NoError(t, err)
	require.Equal(t, forge.EventReview, ev.Type)
	require.Equal(t, "changes_requested", ev.Review.State)

	// The status stays so through later updates: one by someone who is not among the
	// delivery's reviewers (a milestone set) is not a review again; one by a reviewer is.
	for _, tc := range []struct {
		sender string
		review bool
	}{{"real6543", false}, {"bob", true}} {
		later := srcPatch(t, srcFixture(t, "merge_request_hook_milestone_set.json"), func(m map[string]any) {
			m["object_attributes"].(map[string]any)["detailed_merge_status"] = "requested_changes"
			m["reviewers"] = []any{map[string]any{"id": 7, "username": "bob"}}
			m["user"].(map[string]any)["username"] = tc.sender
		})
		ev, err = srcParse(t, "Merge Request Hook", later)
		if tc.review {
			require.NoError(t, err)
			require.Equal(t, forge.EventReview, ev.Type)
			continue
		}
		require.ErrorAs(t, err, &ig, "an update by %s, not a reviewer", tc.sender)
	}
}
