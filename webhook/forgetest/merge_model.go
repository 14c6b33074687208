package forgetest

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// modelMergeRules is what a repository's branch protection says about merges into a branch.
type modelMergeRules struct {
	required  map[string]int  // target branch → approvals required
	protected map[string]bool // target branch → the bot may not merge into it
}

// SetRequiredApprovals makes merges into branch need n approvals: GitLab approvals_required of
// the merge requests targeting it, Forgejo the branch protection's required_approvals.
func (m *model) SetRequiredApprovals(repo, branch string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	if r.merge.required == nil {
		r.merge.required = map[string]int{}
	}
	r.merge.required[branch] = n
}

// ProtectBranch lets nobody but maintainers merge into branch: the bot's merge is refused
// (GitLab 401, Forgejo 405 "User not allowed to merge PR").
func (m *model) ProtectBranch(repo, branch string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(repo)
	if r.merge.protected == nil {
		r.merge.protected = map[string]bool{}
	}
	r.merge.protected[branch] = true
}

// ResolveThreads resolves every review thread of merge request number, as a reviewer does in
// the web UI: each in the name of the author of its first comment.
func (m *model) ResolveThreads(repo string, number int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	opener := map[string]*modelUser{}
	for _, rc := range m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}).threadNotes {
		if opener[rc.discussion] == nil {
			opener[rc.discussion] = rc.author
		}
		rc.resolved, rc.resolvedBy = true, opener[rc.discussion]
	}
}

// MergedWith returns the method the merge API merged merge request number with ("merge",
// "squash", "rebase"), "" while it is not merged through the API.
func (m *model) MergedWith(repo string, number int64) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mustIssueLocked(forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}).mergedWith
}

// approvalsLocked returns who approves mi and, on Forgejo, whose latest verdict requests
// changes: GitLab its approvals; Forgejo the latest APPROVED or REQUEST_CHANGES review per
// reviewer.
func (m *model) approvalsLocked(mi *modelIssue) (approved, changes []string) {
	approved, changes, _ = m.approvalsOnLocked(mi)
	return approved, changes
}

// approvalsOnLocked is approvalsLocked with the head each approval was given on: the review's
// commit on Forgejo, the diff version current when the approval was given on GitLab.
func (m *model) approvalsOnLocked(mi *modelIssue) (approved, changes []string, on []forge.Approval) {
	if !m.sharedNumbers {
		for _, login := range mi.approvedBy {
			on = append(on, forge.Approval{Login: login, SHA: mi.headAtLocked(mi.approvedAt[login])})
		}
		for _, login := range mi.reviewerOrder {
			if mi.reviewerStates[login] == "requested_changes" {
				changes = append(changes, login)
			}
		}
		return slices.Clone(mi.approvedBy), changes, on
	}
	latest := map[string]string{}
	commit := map[string]string{}
	var order []string
	for _, rv := range mi.reviews {
		if rv.state != "APPROVED" && rv.state != "REQUEST_CHANGES" {
			continue
		}
		if _, ok := latest[rv.author.login]; !ok {
			order = append(order, rv.author.login)
		}
		latest[rv.author.login] = rv.state
		commit[rv.author.login] = rv.commit
	}
	for _, login := range order {
		if latest[login] == "APPROVED" {
			approved = append(approved, login)
			on = append(on, forge.Approval{Login: login, SHA: commit[login]})
		} else {
			changes = append(changes, login)
		}
	}
	return approved, changes, on
}

// headAtLocked returns the head of the latest diff version made at or before t ("" for none).
func (mi *modelIssue) headAtLocked(t time.Time) string {
	head := ""
	for _, v := range mi.versions {
		if !v.made.After(t) {
			head = v.sha
		}
	}
	return head
}

// openThreadsLocked counts mi's unresolved review threads: GitLab discussions (every thread
// note is resolvable) with a note not resolved; Forgejo code-comment conversations by path and
// line none of whose comments is resolved.
func (m *model) openThreadsLocked(mi *modelIssue) int {
	resolved := map[string]bool{}
	var threads []string
	for _, rc := range mi.threadNotes {
		key := rc.discussion
		if m.sharedNumbers {
			if rc.pos == nil {
				continue
			}
			key = rc.pos.Key()
		}
		if !slices.Contains(threads, key) {
			threads = append(threads, key)
			resolved[key] = rc.resolved
		}
		if m.sharedNumbers {
			resolved[key] = resolved[key] || rc.resolved
		} else {
			resolved[key] = resolved[key] && rc.resolved
		}
	}
	n := 0
	for _, t := range threads {
		if !resolved[t] {
			n++
		}
	}
	return n
}

// mergeChecksLocked is what the forge reports before a merge of mi in r.
func (m *model) mergeChecksLocked(r *modelRepo, mi *modelIssue) *forge.MergeChecks {
	approved, changes, on := m.approvalsOnLocked(mi)
	req := r.merge.required[mi.target]
	return &forge.MergeChecks{ApprovalsRequired: req, ApprovedBy: approved, Approved: len(approved) >= req,
		ChangesRequested: changes, Approvals: on, OpenThreads: m.openThreadsLocked(mi)}
}

// mergeLocked merges mi with opt the way the forge's merge API does, or returns the status and
// message of its refusal: not open 405; the head moved 409; a protected target GitLab 401,
// Forgejo 405; approvals missing 405; a conflict GitLab 422 "Branch cannot be merged", Forgejo
// 409.
func (m *model) mergeLocked(r *modelRepo, mi *modelIssue, opt forge.MergeOptions) (int, string) {
	forgejo := m.sharedNumbers
	approved, _ := m.approvalsLocked(mi)
	switch {
	case mi.state != "open":
		return http.StatusMethodNotAllowed, "405 Method Not Allowed"
	case opt.HeadSHA != "" && opt.HeadSHA != mi.sha:
		if forgejo {
			return http.StatusConflict, "head out of date"
		}
		return http.StatusConflict, "SHA does not match HEAD of source branch: " + mi.sha
	case r.merge.protected[mi.target] && forgejo:
		return http.StatusMethodNotAllowed, "User not allowed to merge PR"
	case r.merge.protected[mi.target]:
		return http.StatusUnauthorized, "401 Unauthorized"
	case len(approved) < r.merge.required[mi.target]:
		if forgejo {
			return http.StatusMethodNotAllowed, fmt.Sprintf("Not enough approvals: %d of %d", len(approved), r.merge.required[mi.target])
		}
		return http.StatusMethodNotAllowed, "405 Method Not Allowed"
	case mi.mergeStatusOr() == forge.MergeStatusConflict && forgejo:
		return http.StatusConflict, "merge conflicts"
	case mi.mergeStatusOr() == forge.MergeStatusConflict:
		return http.StatusUnprocessableEntity, "Branch cannot be merged"
	}
	method := opt.Method
	if method == "" || (!forgejo && method != forge.MergeSquash) {
		method = forge.MergeCommit // GitLab: the project's merge method, squash or not
	}
	mi.state, mi.mergedWith, mi.updated = "merged", string(method), m.now()
	return 0, ""
}
