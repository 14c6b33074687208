package gitlab

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// GitLab before the fix of gitlab-org/gitlab#517947 (MR !180959) sent the Issue Hook of an
// issue edited through the new work item view or the work item GraphQL mutations with
// object_kind and event_type "work_item"; object_attributes.type (GitLab 17.2+, MR !156760)
// still says "Issue". Such a delivery is an issue's: a label added this way is a label change
// Alfred acts on, not "work items other than issues".
func TestSourceParseWorkItemOfTypeIssue(t *testing.T) {
	t.Parallel()
	body := srcPatch(t, srcFixture(t, "issue_hook_update_label_added.json"), func(m map[string]any) {
		m["object_kind"], m["event_type"] = "work_item", "work_item"
		m["object_attributes"].(map[string]any)["type"] = "Issue"
	})
	ev, err := srcParse(t, "Issue Hook", body)
	require.NoError(t, err, "a work item of type Issue is an issue")
	require.Equal(t, forge.EventLabels, ev.Type)
	require.Equal(t, []string{"critical"}, ev.Labels)

	// Other work items (a task) are still not Alfred's.
	body = srcPatch(t, body, func(m map[string]any) { m["object_attributes"].(map[string]any)["type"] = "Task" })
	_, err = srcParse(t, "Issue Hook", body)
	var ignore *forge.IgnoreError
	require.ErrorAs(t, err, &ignore, "a task is not an issue")
}
