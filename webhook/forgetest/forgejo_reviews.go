package forgetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// fjReviews handles /repos/{o}/{r}/pulls/{index}/reviews… (seg starts after "reviews"), with
// the shapes of Forgejo 15's answers (api-pr2-03-reviews.json, api-pr2-04-review-1-comments.json
// and api-pr2-07-post-review-comment-reply-response.json of the forgejo-live-review fixtures).
func (s *ForgejoServer) fjReviews(w http.ResponseWriter, r *http.Request, p *modelRepo, index string, seg []string) {
	n, _ := strconv.ParseInt(index, 10, 64)
	mi := p.issues[n]
	if mi == nil || !mi.mr {
		s.fjError(w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	var rv *modelReview
	if len(seg) >= 1 {
		id, _ := strconv.ParseInt(seg[0], 10, 64)
		if rv = mi.reviewLocked(id); rv == nil {
			s.fjError(w, http.StatusNotFound, fmt.Sprintf("pull request review does not exist [id: %d]", id))
			return
		}
	}
	switch m := r.Method; {
	case len(seg) == 0 && m == http.MethodGet:
		out := []any{}
		for _, rv := range mi.reviews {
			out = append(out, s.fjReviewJSON(p, mi, rv))
		}
		fjPaginateAs(w, r, s.pageSize, out, totalOnly)
	case len(seg) == 0 && m == http.MethodPost:
		s.fjCreateReview(w, r, p, mi)
	case len(seg) == 2 && seg[1] == "comments" && m == http.MethodGet:
		out := []any{}
		for _, rc := range mi.threadNotes {
			if rc.reviewID == rv.id {
				out = append(out, s.fjReviewCommentJSON(p, mi, rc))
			}
		}
		fjJSON(w, http.StatusOK, out)
	case len(seg) == 2 && seg[1] == "comments" && m == http.MethodPost && !s.NoReviewCommentCall:
		var in struct {
			Path        string `json:"path"`
			Body        string `json:"body"`
			NewPosition int    `json:"new_position"`
			OldPosition int    `json:"old_position"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Path == "" || strings.TrimSpace(in.Body) == "" ||
			(in.NewPosition <= 0 && in.OldPosition <= 0) {
			s.fjError(w, http.StatusUnprocessableEntity, "path, body and a position are required")
			return
		}
		rc := s.addThreadNoteLocked(mi, s.userLocked(BotLogin), rv.id, "", &forge.Position{Path: in.Path, NewLine: in.NewPosition, OldLine: in.OldPosition}, in.Body)
		fjJSON(w, http.StatusOK, s.fjReviewCommentJSON(p, mi, rc))
	default:
		s.fjError(w, http.StatusNotFound, "not found")
	}
}

// fjCreateReview is POST …/reviews: event APPROVED, REQUEST_CHANGES or COMMENT (PENDING is not
// supported), body, commit_id and comments with path, body and new_position or old_position.
// A comment without path or line is 422, as Forgejo answers for a line outside the diff.
func (s *ForgejoServer) fjCreateReview(w http.ResponseWriter, r *http.Request, p *modelRepo, mi *modelIssue) {
	var in struct {
		Event    string `json:"event"`
		Body     string `json:"body"`
		CommitID string `json:"commit_id"`
		Comments []struct {
			Path        string `json:"path"`
			Body        string `json:"body"`
			NewPosition int    `json:"new_position"`
			OldPosition int    `json:"old_position"`
		} `json:"comments"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.fjError(w, http.StatusUnprocessableEntity, "invalid JSON")
		return
	}
	state := in.Event
	switch state {
	case "APPROVED", "REQUEST_CHANGES", "COMMENT":
	default:
		s.fjError(w, http.StatusUnprocessableEntity, fmt.Sprintf("unsupported review event %q", in.Event))
		return
	}
	if state != "APPROVED" && strings.TrimSpace(in.Body) == "" && len(in.Comments) == 0 {
		s.fjError(w, http.StatusUnprocessableEntity, "review event COMMENT requires a body or a comment")
		return
	}
	var seed []SeedReviewComment
	for _, c := range in.Comments {
		if c.Path == "" || (c.NewPosition <= 0 && c.OldPosition <= 0) || strings.TrimSpace(c.Body) == "" {
			s.fjError(w, http.StatusUnprocessableEntity, "review comment needs path, body and a line")
			return
		}
		seed = append(seed, SeedReviewComment{Path: c.Path, NewLine: c.NewPosition, OldLine: c.OldPosition, Body: c.Body})
	}
	s.addReviewLocked(mi, s.userLocked(BotLogin), state, in.Body, in.CommitID, seed)
	fjJSON(w, http.StatusOK, s.fjReviewJSON(p, mi, mi.reviews[len(mi.reviews)-1]))
}

func (s *ForgejoServer) fjReviewJSON(p *modelRepo, mi *modelIssue, rv *modelReview) map[string]any {
	count := 0
	for _, rc := range mi.threadNotes {
		if rc.reviewID == rv.id {
			count++
		}
	}
	commit := rv.commit
	if rv.state == "REQUEST_REVIEW" {
		commit = ""
	}
	pull := fmt.Sprintf("%s/%s/pulls/%d", s.URL, p.path, mi.number)
	return map[string]any{
		"id": rv.id, "user": s.fjUser(rv.author), "team": nil, "state": rv.state, "body": rv.body,
		"commit_id": commit, "stale": commit != "" && commit != mi.sha, "official": rv.state != "COMMENT",
		"dismissed": false, "comments_count": count, "submitted_at": fjTime(rv.submitted),
		"updated_at": fjTime(rv.submitted), "html_url": fmt.Sprintf("%s#issuecomment-%d", pull, rv.summaryID),
		"pull_request_url": pull,
	}
}

func (s *ForgejoServer) fjReviewCommentJSON(p *modelRepo, mi *modelIssue, rc *modelReviewComment) map[string]any {
	pull := fmt.Sprintf("%s/%s/pulls/%d", s.URL, p.path, mi.number)
	var resolver any
	if rc.resolved {
		resolver = s.fjUser(cmp.Or(rc.resolvedBy, s.userLocked(BotLogin)))
	}
	return map[string]any{
		"id": rc.id, "body": rc.body, "user": s.fjUser(rc.author), "resolver": resolver,
		"pull_request_review_id": rc.reviewID, "created_at": fjTime(rc.created), "updated_at": fjTime(rc.created),
		"path": rc.pos.Path, "commit_id": mi.sha, "original_commit_id": "", "diff_hunk": rc.hunk,
		"position": rc.pos.NewLine, "original_position": rc.pos.OldLine,
		"html_url": fmt.Sprintf("%s#issuecomment-%d", pull, rc.id), "pull_request_url": pull,
	}
}

// fjReviewers lists requested_reviewers: everyone asked (Forgejo keeps them listed after they
// reviewed).
func (s *ForgejoServer) fjReviewers(mi *modelIssue) []any {
	out := []any{}
	for _, login := range mi.reviewers {
		out = append(out, s.fjUser(s.userLocked(login)))
	}
	return out
}
