package forgetest

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// The pipeline endpoints of GitLabServer: pipelines, their jobs and job traces.

func (s *GitLabServer) glPipelines(w http.ResponseWriter, r *http.Request, p *modelRepo) {
	q := r.URL.Query()
	var runs []*modelRun
	for sha, rs := range p.runs {
		if want := q.Get("sha"); want != "" && want != sha {
			continue
		}
		runs = append(runs, rs...)
	}
	slices.SortFunc(runs, func(a, b *modelRun) int { return int(b.id - a.id) }) // order_by=id, sort=desc
	if q.Get("sort") == "asc" {
		slices.Reverse(runs)
	}
	out := []any{}
	for _, run := range runs {
		if st := q.Get("status"); st != "" && st != run.runStatus() {
			continue
		}
		if ref := q.Get("ref"); ref != "" && ref != run.ref {
			continue
		}
		out = append(out, s.glPipelineJSON(p, run))
	}
	glPaginate(w, r, s.pageSize, out)
}

func (s *GitLabServer) glRun(p *modelRepo, id string) *modelRun {
	n, _ := strconv.ParseInt(id, 10, 64)
	for _, rs := range p.runs {
		for _, run := range rs {
			if got := run.find(n); got != nil {
				return got
			}
		}
	}
	return nil
}

// glJobs answers GET /projects/:id/pipelines/:id/jobs (bridges false) and …/bridges (bridges
// true): the pipeline's jobs, or its trigger jobs each with its downstream pipeline, filtered
// by scope (scope[]=…, scope=…).
func (s *GitLabServer) glJobs(w http.ResponseWriter, r *http.Request, p *modelRepo, pid string, bridges bool) {
	run := s.glRun(p, pid)
	if run == nil {
		glMessage(w, http.StatusNotFound, "404 Not found")
		return
	}
	scopes := append(r.URL.Query()["scope[]"], r.URL.Query()["scope"]...)
	out := []any{}
	for _, j := range run.jobs {
		st := glJobStatus(j.State)
		if (j.child != nil) != bridges || len(scopes) > 0 && !slices.Contains(scopes, st) {
			continue
		}
		job := map[string]any{
			"id": j.id, "name": j.Name, "status": st, "stage": "test", "allow_failure": false,
			"ref": run.ref, "web_url": seedOr(j.WebURL, fmt.Sprintf("%s/%s/-/jobs/%d", s.URL, p.path, j.id)),
			"pipeline": s.glPipelineJSON(p, run), "user": s.glUser(s.userLocked(BotLogin)),
		}
		if bridges {
			job["downstream_pipeline"] = s.glPipelineJSON(p, j.child)
		}
		out = append(out, job)
	}
	glPaginate(w, r, s.pageSize, out)
}

func (s *GitLabServer) glTrace(w http.ResponseWriter, p *modelRepo, id string) {
	n, _ := strconv.ParseInt(id, 10, 64)
	for _, rs := range p.runs {
		for _, run := range rs {
			if j := run.findJob(n); j != nil {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = w.Write([]byte(j.Log))
				return
			}
		}
	}
	glMessage(w, http.StatusNotFound, "404 Not found")
}

func glJobStatus(st forge.CIState) string {
	switch st {
	case forge.CISuccess:
		return "success"
	case forge.CIFailed:
		return "failed"
	case forge.CISkipped:
		return "skipped"
	}
	return "running"
}

func (s *GitLabServer) glPipelineJSON(p *modelRepo, run *modelRun) map[string]any {
	t := s.clock.Format(time.RFC3339Nano)
	return map[string]any{
		"id": run.id, "iid": run.id, "project_id": p.id, "sha": run.sha, "ref": run.ref,
		"status": run.runStatus(), "source": "push", "created_at": t, "updated_at": t,
		"web_url": fmt.Sprintf("%s/%s/-/pipelines/%d", s.URL, p.path, run.id),
	}
}

// glCommitMRs answers GET /projects/:id/repository/commits/:sha/merge_requests: the merge
// requests of the project that hold the commit (one of the heads they had), newest first.
func (s *GitLabServer) glCommitMRs(w http.ResponseWriter, r *http.Request, p *modelRepo, sha string) {
	out := []any{}
	mrs := p.allMRsLocked(s.sharedNumbers)
	slices.SortFunc(mrs, func(a, b *modelIssue) int { return int(b.number - a.number) })
	for _, mi := range mrs {
		if slices.ContainsFunc(mi.versions, func(v modelVersion) bool { return v.sha == sha }) {
			out = append(out, s.glIssueJSON(p, mi))
		}
	}
	glPaginate(w, r, s.pageSize, out)
}
