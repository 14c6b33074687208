package forgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// NewForgejoHandler returns a ForgejoServer that listens nowhere, for a stand-in run as a
// process (alfred demo): the caller serves it (it is an http.Handler) at url, which becomes
// its URL. Token is random; only the bot account (BotLogin) exists.
func NewForgejoHandler(url string) *ForgejoServer {
	return &ForgejoServer{model: newModel(true), Token: randomHex(20), URL: strings.TrimSuffix(url, "/")}
}

// ServeHTTP answers r as the server NewForgejoServer starts does.
func (s *ForgejoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(w, r) }

// IssueHook returns the body Forgejo sends for an event of the issue ref, as its IssuePayload
// (action, number, the issue after the change, repository, sender): send it with the event
// type issue_assign for "assigned" and "unassigned", issue_label for "label_updated" and
// "label_cleared", issues for "opened", "edited", "closed" and "reopened" (NewForgejoRequest).
// sender is the account that made the change. It panics for an unknown issue or account.
func (s *ForgejoServer) IssueHook(ref forge.IssueRef, action, sender string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustRepoLocked(ref.Repo)
	is := s.mustIssueLocked(ref)
	return fjHookJSON(map[string]any{"action": action, "number": is.number, "issue": s.fjIssueJSON(p, is),
		"repository": s.fjRepo(p), "sender": s.fjUser(s.mustUserLocked(sender))})
}

// CommentHook returns the body Forgejo sends with the event type issue_comment for the comment
// id on an issue of repo, as its IssueCommentPayload (action "created" or "edited", the issue,
// the comment, repository, its author as sender, is_pull). It panics for an unknown comment.
func (s *ForgejoServer) CommentHook(repo string, id int64, action string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustRepoLocked(repo)
	is, c := s.findCommentLocked(p, id)
	if c == nil {
		panic(fmt.Sprintf("forgetest: unknown comment %d in %s", id, repo))
	}
	return fjHookJSON(map[string]any{"action": action, "issue": s.fjIssueJSON(p, is), "comment": s.fjCommentJSON(p, is, c),
		"repository": s.fjRepo(p), "sender": s.fjUser(c.author), "is_pull": is.mr})
}

func fjHookJSON(v map[string]any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("forgetest: encoding a hook: %v", err))
	}
	return b
}

// AddIssueLabels adds labels to the issue ref, creating them in its repository when missing,
// as a human does on the forge's page (the delivery is IssueHook's "label_updated").
func (m *model) AddIssueLabels(ref forge.IssueRef, names ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.mustRepoLocked(ref.Repo)
	is := m.mustIssueLocked(ref)
	for _, n := range names {
		m.ensureLabelLocked(r, n, DefaultLabelColor)
		if !slices.Contains(is.labels, n) {
			is.labels = append(is.labels, n)
		}
	}
	is.updated = m.now()
}
