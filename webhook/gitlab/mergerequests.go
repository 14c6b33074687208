package gitlab

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/forgehttp"
)

// CreateMergeRequest returns the open merge request of mr.SourceBranch if there is one,
// else opens a new one (an empty TargetBranch means the default branch). When GitLab
// answers 409 because one was opened meanwhile, it returns that one.
func (c *Client) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	if existing, err := c.openMergeRequest(ctx, repo, mr.SourceBranch); err != nil || existing != nil {
		return existing, err
	}
	target, err := forgehttp.TargetBranch(ctx, c, repo, mr.TargetBranch)
	if err != nil {
		return nil, err
	}
	created, resp, err := c.api.MergeRequests.CreateMergeRequest(repo, &gl.CreateMergeRequestOptions{
		Title: gl.Ptr(mr.Title), Description: gl.Ptr(mr.Body),
		SourceBranch: gl.Ptr(mr.SourceBranch), TargetBranch: gl.Ptr(target),
	}, gl.WithContext(ctx))
	if err != nil {
		if clientStatus(resp, err) == http.StatusConflict {
			if existing, err2 := c.openMergeRequest(ctx, repo, mr.SourceBranch); err2 == nil && existing != nil {
				return existing, nil
			}
		}
		return nil, c.wrap("create merge request for "+mr.SourceBranch+" in "+repo, resp, err)
	}
	return clientMergeRequest(&created.BasicMergeRequest), nil
}

// openMergeRequest finds the open merge request whose source branch is branch in the
// repository itself, or nil: a fork's merge request from a branch of the same name is not the
// bot's.
func (c *Client) openMergeRequest(ctx context.Context, repo, branch string) (*forge.MergeRequest, error) {
	list, resp, err := c.api.MergeRequests.ListProjectMergeRequests(repo, &gl.ListProjectMergeRequestsOptions{
		ListOptions: gl.ListOptions{PerPage: 100}, State: gl.Ptr("opened"), SourceBranch: gl.Ptr(branch),
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("list merge requests of "+repo, resp, err)
	}
	for _, m := range list {
		if m.SourceBranch == branch && m.State == "opened" && m.SourceProjectID == m.TargetProjectID {
			return clientMergeRequest(m), nil
		}
	}
	return nil, nil
}

// MergeRequest reads a merge request by iid. State is "open", "closed" or "merged".
func (c *Client) MergeRequest(ctx context.Context, repo string, number int64) (*forge.MergeRequest, error) {
	mr, resp, err := c.api.MergeRequests.GetMergeRequest(repo, number, nil, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("get merge request %s!%d", repo, number), resp, err)
	}
	return clientMergeRequest(&mr.BasicMergeRequest), nil
}

func clientMergeRequest(m *gl.BasicMergeRequest) *forge.MergeRequest {
	out := &forge.MergeRequest{
		Number: m.IID, Title: m.Title, Body: m.Description, SourceBranch: m.SourceBranch,
		TargetBranch: m.TargetBranch, HeadSHA: m.SHA, WebURL: m.WebURL,
		FromFork: hookFromFork(int64(m.SourceProjectID), int64(m.TargetProjectID)),
	}
	switch m.State {
	case "opened", "locked":
		out.State = "open"
	case "merged":
		out.State, out.Merged = "merged", true
	default:
		out.State = m.State
	}
	if m.Author != nil {
		out.Author = forge.User{ID: m.Author.ID, Login: m.Author.Username}
	}
	if out.State == "open" {
		out.MergeStatus = hookMergeStatus(m.DetailedMergeStatus, "")
		if m.HasConflicts {
			out.MergeStatus = forge.MergeStatusConflict
		}
	}
	if m.UpdatedAt != nil {
		out.UpdatedAt = *m.UpdatedAt
	}
	return out
}

var clientMRRef = regexp.MustCompile(`^refs/merge-requests/(\d+)/`)

// CIStatus returns the latest pipeline for sha (GET /projects/:id/pipelines?sha=, highest id).
// GitLab "success" is CISuccess, "failed" CIFailed, "canceled" and "canceling" CICanceled,
// "skipped" and "manual" CISkipped, anything else (created, waiting_for_resource, preparing, pending, running,
// scheduled) CIPending; no pipeline is CINone. For CIFailed it lists the failed jobs (except
// allow_failure ones) with the last LogTailBytes of each job's trace; a trace it cannot read
// leaves Log empty.
func (c *Client) CIStatus(ctx context.Context, repo, sha string) (*forge.Pipeline, error) {
	if sha == "" {
		return &forge.Pipeline{State: forge.CINone}, nil // ?sha= would list every pipeline
	}
	list, resp, err := c.api.Pipelines.ListProjectPipelines(repo, &gl.ListProjectPipelinesOptions{
		ListOptions: gl.ListOptions{PerPage: 1}, SHA: gl.Ptr(sha), OrderBy: gl.Ptr("id"), Sort: gl.Ptr("desc"),
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("list pipelines of "+repo+"@"+sha, resp, err)
	}
	var p *gl.PipelineInfo
	if len(list) > 0 {
		p = list[0]
	} else if p, err = c.mergedResultsPipeline(ctx, repo, sha); err != nil {
		return nil, err
	}
	if p == nil {
		return &forge.Pipeline{State: forge.CINone, SHA: sha}, nil
	}
	out := &forge.Pipeline{ID: p.ID, SHA: p.SHA, Ref: p.Ref, WebURL: p.WebURL}
	if m := clientMRRef.FindStringSubmatch(p.Ref); m != nil {
		out.MergeRequest, _ = strconv.ParseInt(m[1], 10, 64)
	}
	switch p.Status {
	case "success":
		out.State = forge.CISuccess
	case "failed":
		out.State = forge.CIFailed
	case "canceled", "canceling":
		out.State = forge.CICanceled
	case "skipped", "manual":
		out.State = forge.CISkipped
	default:
		out.State = forge.CIPending
	}
	if out.State != forge.CIFailed {
		return out, nil
	}
	if out.FailedJobs, err = c.failedJobs(ctx, repo, p.ProjectID, p.ID, "", 0); err != nil {
		return nil, err
	}
	return out, nil
}

// childDepth bounds how deep failedJobs follows child pipelines (GitLab allows two levels of
// child pipelines below a parent: docs.gitlab.com/ci/pipelines/downstream_pipelines/).
const childDepth = 2

// failedJobs lists the failed jobs of pipeline id of project (0: unknown; every page; allowed
// failures left out) with the tail of each trace, then those of the child pipelines its failed
// trigger jobs started (GitLab "bridges", which the jobs list leaves out: GET
// /projects/:id/pipelines/:id/bridges), named "<trigger job> / <job>" after prefix, at most
// childDepth levels down. A trigger job whose downstream pipeline is in another project (a
// multi-project pipeline, whose jobs this project's API does not list) or never started is a
// failed job itself.
func (c *Client) failedJobs(ctx context.Context, repo string, project, id int64, prefix string, depth int) ([]forge.FailedJob, error) {
	var out []forge.FailedJob
	var page gl.RequestOptionFunc
	for {
		reqOpts := []gl.RequestOptionFunc{gl.WithContext(ctx)}
		if page != nil {
			reqOpts = append(reqOpts, page)
		}
		jobs, resp, err := c.api.Jobs.ListPipelineJobs(repo, id, &gl.ListJobsOptions{
			ListOptions: gl.ListOptions{PerPage: 100}, Scope: &[]gl.BuildStateValue{gl.Failed},
		}, reqOpts...)
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("list failed jobs of pipeline %d in %s", id, repo), resp, err)
		}
		for _, j := range jobs {
			if j.AllowFailure || j.Status != string(gl.Failed) {
				continue
			}
			log, err := c.traceTail(ctx, repo, j.ID)
			if err != nil && ctx.Err() != nil {
				return nil, c.wrap("read job trace", nil, ctx.Err())
			}
			out = append(out, forge.FailedJob{Name: prefix + j.Name, WebURL: j.WebURL, Log: log})
		}
		next, ok := gl.WithNext(resp)
		if !ok || len(jobs) == 0 {
			break
		}
		page = next
	}
	if depth >= childDepth {
		return out, nil
	}
	bridges, resp, err := c.api.Jobs.ListPipelineBridges(repo, id, &gl.ListJobsOptions{
		ListOptions: gl.ListOptions{PerPage: 100}, Scope: &[]gl.BuildStateValue{gl.Failed},
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("list failed trigger jobs of pipeline %d in %s", id, repo), resp, err)
	}
	for _, b := range bridges {
		if b.AllowFailure || b.Status != string(gl.Failed) {
			continue
		}
		down, here := b.DownstreamPipeline, cmp.Or(project, b.Pipeline.ProjectID)
		if down == nil || down.ProjectID != 0 && here != 0 && down.ProjectID != here {
			out = append(out, forge.FailedJob{Name: prefix + b.Name, WebURL: cmp.Or(downURL(down), b.WebURL),
				Log: "its downstream pipeline failed: " + cmp.Or(downURL(down), b.FailureReason)})
			continue
		}
		child, err := c.failedJobs(ctx, repo, cmp.Or(down.ProjectID, here), down.ID, prefix+b.Name+" / ", depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, child...)
	}
	return out, nil
}

// downURL is the page of a downstream pipeline, "" for none.
func downURL(p *gl.PipelineInfo) string {
	if p == nil {
		return ""
	}
	return p.WebURL
}

// mergedResultsPipeline finds the pipeline of head commit sha that no pipeline list by sha
// shows: a merged-results or merge-train pipeline, which GitLab runs on a merge commit of the
// head into the target branch (refs/merge-requests/<iid>/merge or /train), with that merge
// commit as its sha. It is the head_pipeline of the open merge request whose head is sha
// (the latest pipeline of the head's sha or of its merge), read through the merge requests
// that hold the commit: GET /projects/:id/repository/commits/:sha/merge_requests, then GET
// /projects/:id/merge_requests/:iid, and, for a pipeline on another commit, GET
// /projects/:id/repository/commits/:sha of it to check that sha is one of its parents (until
// the head has a pipeline, head_pipeline is an older head's). nil when none has one.
func (c *Client) mergedResultsPipeline(ctx context.Context, repo, sha string) (*gl.PipelineInfo, error) {
	mrs, resp, err := c.api.Commits.ListMergeRequestsByCommit(repo, sha, gl.WithContext(ctx))
	if err != nil {
		return nil, c.wrap("list merge requests of "+repo+"@"+sha, resp, err)
	}
	for _, m := range mrs {
		if m.State != "opened" || m.SHA != sha {
			continue
		}
		mr, resp, err := c.api.MergeRequests.GetMergeRequest(repo, m.IID, nil, gl.WithContext(ctx))
		if err != nil {
			return nil, c.wrap(fmt.Sprintf("read merge request !%d of %s", m.IID, repo), resp, err)
		}
		hp := mr.HeadPipeline
		if hp == nil || mr.SHA != sha {
			continue
		}
		if hp.SHA != sha {
			// GitLab moves head_pipeline only once the new head has a pipeline: until then it is
			// an older head's (or, after the head moved back, a newer one's). A merged-results
			// pipeline of this head runs on a merge ref, on a merge commit with the head as a
			// parent.
			if !(forge.Pipeline{Ref: hp.Ref}).MergedResults() {
				continue
			}
			commit, resp, err := c.api.Commits.GetCommit(repo, hp.SHA, nil, gl.WithContext(ctx))
			if err != nil {
				return nil, c.wrap(fmt.Sprintf("read commit %s of %s", hp.SHA, repo), resp, err)
			}
			if !slices.Contains(commit.ParentIDs, sha) {
				continue
			}
		}
		return &gl.PipelineInfo{ID: hp.ID, ProjectID: hp.ProjectID, SHA: hp.SHA, Ref: hp.Ref, Status: hp.Status, WebURL: hp.WebURL}, nil
	}
	return nil, nil
}

// traceTail streams GET /projects/:id/jobs/:job_id/trace keeping only the last LogTailBytes.
func (c *Client) traceTail(ctx context.Context, repo string, job int64) (string, error) {
	req, err := c.api.NewRequest(http.MethodGet, fmt.Sprintf("projects/%s/jobs/%d/trace", gl.PathEscape(repo), job), nil,
		[]gl.RequestOptionFunc{gl.WithContext(ctx)})
	if err != nil {
		return "", err
	}
	tw := &clientTail{max: LogTailBytes}
	if _, err := c.api.Do(req, tw); err != nil {
		return "", err
	}
	return string(tw.buf), nil
}

// clientTail is an io.Writer keeping the last max bytes written to it.
type clientTail struct {
	max int
	buf []byte
}

func (t *clientTail) Write(p []byte) (int, error) {
	n := len(p)
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return n, nil
}
