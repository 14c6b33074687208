package gitlab_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// answering returns a client of a GitLab that answers each path ending in a key of routes with
// its JSON body, and anything else 404 "Not found" as GitLab does (a pipeline id of another
// project is one: lib/api/ci/pipelines.rb finds it among the project's own). For CI shapes the
// stand-in does not model: pipelines of another project, a head that moved back.
func answering(t *testing.T, routes map[string]string) *gitlab.Client {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for k, body := range routes {
			if strings.HasSuffix(r.URL.EscapedPath(), k) {
				_, _ = fmt.Fprint(w, body)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprint(w, `{"message":"404 Not found"}`)
	}))
	t.Cleanup(s.Close)
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: s.URL, Token: "t", MaxRetries: -1})
	require.NoError(t, err)
	return c
}

const (
	headOne = "1111111111111111111111111111111111111111"
	headTwo = "2222222222222222222222222222222222222222"
)

// A trigger job whose downstream pipeline is in another project (a multi-project pipeline,
// strategy: depend) failed: its jobs are not this project's to list, so the trigger job is the
// failed job, and the CI read does not fail with that project's 404.
func TestCIStatusMultiProjectDownstream(t *testing.T) {
	t.Parallel()
	c := answering(t, map[string]string{
		"/projects/acme%2Fshop/pipelines":         `[{"id":10,"project_id":1,"sha":"` + headOne + `","ref":"main","status":"failed"}]`,
		"/projects/acme%2Fshop/pipelines/10/jobs": `[]`,
		"/projects/acme%2Fshop/pipelines/10/bridges": `[{"id":11,"name":"deploy-docs","status":"failed","allow_failure":false,` +
			`"pipeline":{"id":10,"project_id":1},"downstream_pipeline":{"id":500,"project_id":99,"sha":"abc","ref":"main",` +
			`"status":"failed","web_url":"https://gitlab.example/acme/docs/-/pipelines/500"}}]`,
	})
	p, err := c.CIStatus(t.Context(), "acme/shop", headOne)
	require.NoError(t, err)
	require.Equal(t, forge.CIFailed, p.State)
	require.Len(t, p.FailedJobs, 1)
	require.Equal(t, "deploy-docs", p.FailedJobs[0].Name)
	require.Equal(t, "https://gitlab.example/acme/docs/-/pipelines/500", p.FailedJobs[0].WebURL)
}

// The head moved back to headOne (headTwo, its child, dropped by a force-push): headOne has no
// pipeline of its own yet and head_pipeline is still headTwo's, on an ordinary ref. It is not
// headOne's CI, though headOne is headTwo's parent: only a merged-results pipeline runs on a
// commit other than the head.
func TestCIStatusHeadMovedBack(t *testing.T) {
	t.Parallel()
	c := answering(t, map[string]string{
		"/projects/acme%2Fshop/pipelines":                                         `[]`,
		"/projects/acme%2Fshop/repository/commits/" + headOne + "/merge_requests": `[{"iid":5,"project_id":1,"state":"opened","sha":"` + headOne + `"}]`,
		"/projects/acme%2Fshop/merge_requests/5": `{"iid":5,"project_id":1,"state":"opened","sha":"` + headOne +
			`","head_pipeline":{"id":20,"sha":"` + headTwo + `","ref":"refs/merge-requests/5/head","status":"success"}}`,
		"/projects/acme%2Fshop/repository/commits/" + headTwo: `{"id":"` + headTwo + `","parent_ids":["` + headOne + `"]}`,
	})
	p, err := c.CIStatus(t.Context(), "acme/shop", headOne)
	require.NoError(t, err)
	require.Equal(t, forge.CINone, p.State, "the child's pipeline is not the head's CI")
}
