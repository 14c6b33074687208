package forgetest

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// glMergeFields adds a merge request's mergeability, diff_refs and reviewers to its JSON, as
// GitLab's GET /merge_requests/:iid answers them.
func (s *GitLabServer) glMergeFields(m map[string]any, p *modelRepo, is *modelIssue) {
	detailed, legacy, conflicts := "mergeable", "can_be_merged", false
	switch is.mergeStatusOr() {
	case forge.MergeStatusConflict:
		detailed, legacy, conflicts = "conflict", "cannot_be_merged", true
	case forge.MergeStatusChecking:
		detailed, legacy = "checking", "checking"
	}
	if is.state != "open" {
		detailed = "not_open"
	}
	m["detailed_merge_status"], m["merge_status"], m["has_conflicts"] = detailed, legacy, conflicts
	base := p.headLocked(is.target)
	m["diff_refs"] = map[string]any{"base_sha": base, "head_sha": is.sha, "start_sha": base}
	reviewers := []any{}
	for _, login := range is.reviewers {
		reviewers = append(reviewers, s.glUser(s.userLocked(login)))
	}
	m["reviewers"] = reviewers
}

// glNoteDiscussion is the discussion id GitLab gives an individual note.
func glNoteDiscussion(id int64) string {
	sum := sha1.Sum(fmt.Appendf(nil, "note %d", id))
	return hex.EncodeToString(sum[:])
}

// glDiscussions handles …/merge_requests/:iid/discussions… (seg starts after "discussions"):
// every note is in a discussion; merge request comments are individual notes.
func (s *GitLabServer) glDiscussions(w http.ResponseWriter, r *http.Request, p *modelRepo, mi *modelIssue, seg []string) {
	switch {
	case len(seg) == 0 && r.Method == http.MethodGet:
		type disc struct {
			id         string
			individual bool
			first      time.Time
			notes      []any
		}
		var all []*disc
		byID := map[string]*disc{}
		for _, c := range mi.comments {
			d := &disc{id: glNoteDiscussion(c.id), individual: true, first: c.created, notes: []any{s.glNoteJSON(p, mi, c)}}
			all, byID[d.id] = append(all, d), d
		}
		for _, rc := range mi.threadNotes {
			d := byID[rc.discussion]
			if d != nil {
				d.individual = false // a reply turns an individual note into a thread
			} else {
				d = &disc{id: rc.discussion, first: rc.created}
				byID[rc.discussion] = d
				all = append(all, d)
			}
			d.notes = append(d.notes, s.glThreadNoteJSON(p, mi, rc))
		}
		slices.SortStableFunc(all, func(a, b *disc) int { return a.first.Compare(b.first) })
		out := []any{}
		for _, d := range all {
			out = append(out, map[string]any{"id": d.id, "individual_note": d.individual, "notes": d.notes})
		}
		glPaginate(w, r, s.pageSize, out)
	case len(seg) == 0 && r.Method == http.MethodPost:
		s.glCreateDiscussion(w, r, p, mi)
	case len(seg) == 2 && seg[1] == "notes" && r.Method == http.MethodPost:
		raw, err := glBody(r)
		body, _ := glString(raw, "body")
		if err != nil || strings.TrimSpace(body) == "" {
			glJSON(w, http.StatusBadRequest, map[string]any{"error": "body is missing"})
			return
		}
		thread := mi.discussionLocked(seg[0])
		var pos *forge.Position
		if len(thread) == 0 {
			c := s.glIndividualNote(mi, seg[0])
			if c == nil {
				glMessage(w, http.StatusNotFound, "404 Discussion Not Found")
				return
			}
		} else {
			pos = thread[0].pos
		}
		rc := s.addThreadNoteLocked(mi, s.userLocked(BotLogin), 0, seg[0], pos, body)
		glJSON(w, http.StatusCreated, s.glThreadNoteJSON(p, mi, rc))
	case len(seg) == 1 && r.Method == http.MethodPut:
		raw, _ := glBody(r)
		resolved, ok := glString(raw, "resolved")
		if !ok {
			resolved = r.URL.Query().Get("resolved")
		}
		thread := mi.discussionLocked(seg[0])
		if len(thread) == 0 {
			glMessage(w, http.StatusNotFound, "404 Discussion Not Found")
			return
		}
		if resolved == "" {
			glJSON(w, http.StatusBadRequest, map[string]any{"error": "resolved is missing"})
			return
		}
		notes := []any{}
		for _, rc := range thread {
			rc.resolved, rc.resolvedBy = resolved == "true", nil
			if rc.resolved {
				rc.resolvedBy = s.userLocked(BotLogin) // the token's account
			}
			notes = append(notes, s.glThreadNoteJSON(p, mi, rc))
		}
		glJSON(w, http.StatusOK, map[string]any{"id": seg[0], "individual_note": false, "notes": notes})
	default:
		glMessage(w, http.StatusNotFound, "404 Not Found")
	}
}

func (s *GitLabServer) glIndividualNote(mi *modelIssue, discussion string) *modelComment {
	for _, c := range mi.comments {
		if glNoteDiscussion(c.id) == discussion {
			return c
		}
	}
	return nil
}

// glCreateDiscussion is POST …/discussions with body and an optional position; a text position
// needs base_sha, start_sha, head_sha, position_type "text", new_path or old_path and new_line
// or old_line, else GitLab answers 400.
func (s *GitLabServer) glCreateDiscussion(w http.ResponseWriter, r *http.Request, p *modelRepo, mi *modelIssue) {
	var in struct {
		Body     string `json:"body"`
		Position *struct {
			BaseSHA      string `json:"base_sha"`
			StartSHA     string `json:"start_sha"`
			HeadSHA      string `json:"head_sha"`
			PositionType string `json:"position_type"`
			NewPath      string `json:"new_path"`
			OldPath      string `json:"old_path"`
			NewLine      int    `json:"new_line"`
			OldLine      int    `json:"old_line"`
		} `json:"position"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || strings.TrimSpace(in.Body) == "" {
		glJSON(w, http.StatusBadRequest, map[string]any{"error": "body is missing"})
		return
	}
	var pos *forge.Position
	if q := in.Position; q != nil {
		if q.PositionType != "text" || q.BaseSHA == "" || q.StartSHA == "" || q.HeadSHA == "" ||
			cmp.Or(q.NewPath, q.OldPath) == "" || (q.NewLine <= 0 && q.OldLine <= 0) {
			glMessage(w, http.StatusBadRequest, `400 Bad request - Note {:line_code=>["can't be blank", "must be a valid line code"]}`)
			return
		}
		pos = &forge.Position{Path: cmp.Or(q.NewPath, q.OldPath), NewLine: q.NewLine, OldLine: q.OldLine}
		if q.OldPath != "" && q.OldPath != pos.Path {
			pos.OldPath = q.OldPath
		}
	}
	rc := s.addThreadNoteLocked(mi, s.userLocked(BotLogin), 0, "", pos, in.Body)
	glJSON(w, http.StatusCreated, map[string]any{"id": rc.discussion, "individual_note": false,
		"notes": []any{s.glThreadNoteJSON(p, mi, rc)}})
}

func (s *GitLabServer) glThreadNoteJSON(p *modelRepo, mi *modelIssue, rc *modelReviewComment) map[string]any {
	m := s.glNoteJSON(p, mi, &modelComment{id: rc.id, body: rc.body, author: rc.author, created: rc.created, updated: rc.created})
	m["resolvable"], m["resolved"], m["resolved_by"] = true, rc.resolved, nil
	if rc.resolved && rc.resolvedBy != nil {
		m["resolved_by"] = s.glUser(rc.resolvedBy)
	}
	if rc.pos != nil {
		base := p.headLocked(mi.target)
		var newLine, oldLine any
		if rc.pos.NewLine > 0 {
			newLine = rc.pos.NewLine
		}
		if rc.pos.OldLine > 0 {
			oldLine = rc.pos.OldLine
		}
		m["type"] = "DiffNote"
		m["position"] = map[string]any{
			"base_sha": base, "start_sha": base, "head_sha": mi.sha, "position_type": "text",
			"new_path": rc.pos.Path, "old_path": cmp.Or(rc.pos.OldPath, rc.pos.Path), "new_line": newLine, "old_line": oldLine,
		}
	} else {
		m["type"] = "DiscussionNote"
	}
	return m
}
