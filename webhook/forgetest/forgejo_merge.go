package forgetest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// fjGetBranch is GET /repos/{o}/{r}/branches/{branch} (seg is the branch's path segments): name,
// commit, protected, required_approvals and user_can_merge, as Forgejo answers any reader.
func (s *ForgejoServer) fjGetBranch(w http.ResponseWriter, p *modelRepo, seg []string) {
	name := strings.Join(seg, "/")
	sha, ok := p.branches[name]
	if !ok && name != p.defaultBranch {
		s.fjError(w, http.StatusNotFound, "branch does not exist [repo_id: "+strconv.FormatInt(p.id, 10)+" name: "+name+"]")
		return
	}
	if sha == "" {
		sha = p.headLocked(name)
	}
	req := p.merge.required[name]
	protected := req > 0 || p.merge.protected[name]
	fjJSON(w, http.StatusOK, map[string]any{
		"name": name, "commit": map[string]any{"id": sha}, "protected": protected,
		"required_approvals": req, "enable_status_check": false, "status_check_contexts": []string{},
		"user_can_push": !protected, "user_can_merge": !p.merge.protected[name],
		"effective_branch_protection_name": map[bool]string{true: name, false: ""}[protected],
	})
}

// fjMerge is POST /repos/{o}/{r}/pulls/{index}/merge with Do and head_commit_id: 200 with an
// empty body once merged, or Forgejo's refusal (see mergeLocked).
func (s *ForgejoServer) fjMerge(w http.ResponseWriter, r *http.Request, p *modelRepo, index string) {
	n, _ := strconv.ParseInt(index, 10, 64)
	mi := p.issues[n]
	if mi == nil || !mi.mr {
		s.fjError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	var in struct {
		Do           string `json:"Do"`
		HeadCommitID string `json:"head_commit_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, "invalid JSON")
		return
	}
	method, err := forge.ParseMergeMethod(in.Do)
	if err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, "[Do]: Invalid merge style")
		return
	}
	if status, msg := s.mergeLocked(p, mi, forge.MergeOptions{Method: method, HeadSHA: in.HeadCommitID}); status != 0 {
		s.fjError(w, status, msg)
		return
	}
	w.WriteHeader(http.StatusOK)
}
