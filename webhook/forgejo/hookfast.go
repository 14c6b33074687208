package forgejo

import (
	"bytes"
	"encoding/json"

	"github.com/goccy/go-json/jsontext"
	gojsonv2 "github.com/goccy/go-json/v2"

	"github.com/alfred-bot/alfred/webhook/internal/fastjson"
)

// The lean* types mirror hookBody with plain leaf types (no UnmarshalJSON on users or labels), so
// a payload of the usual shape decodes in one pass instead of scanning every nested user object
// again inside a custom decoder. decodeHook decodes them with github.com/goccy/go-json, which
// skips the separate validation pass and the reflection of encoding/json; where that library
// refuses a payload (a bare-string user or label, a list or number of the wrong type, anything it
// reads otherwise), encoding/json decodes it as before: through the lean types, else through the
// lenient hookBody types, which decide the outcome. FuzzFastDecode holds the two libraries to the
// same lean value on every payload the fast one accepts.

type leanBody struct {
	Action            string       `json:"action"`
	Number            int64        `json:"number"`
	CommitID          string       `json:"commit_id"`
	IsPull            *bool        `json:"is_pull"`
	Issue             *leanIssue   `json:"issue"`
	PullRequest       *leanPull    `json:"pull_request"`
	Comment           *leanComment `json:"comment"`
	Review            *hookReview  `json:"review"`
	RequestedReviewer *leanUser    `json:"requested_reviewer"`
	Repository        struct {
		FullName string   `json:"full_name"`
		Name     string   `json:"name"`
		Owner    leanUser `json:"owner"`
	} `json:"repository"`
	Sender leanUser `json:"sender"`

	ID        int64    `json:"id"`
	SHA       string   `json:"sha"`
	State     string   `json:"state"`
	Context   string   `json:"context"`
	TargetURL string   `json:"target_url"`
	CreatedAt hookTime `json:"created_at"`
	UpdatedAt hookTime `json:"updated_at"`
}

type leanIssue struct {
	Number      int64                  `json:"number"`
	User        leanUser               `json:"user"`
	Title       string                 `json:"title"`
	Body        string                 `json:"body"`
	State       string                 `json:"state"`
	Labels      leanList[leanLabel]    `json:"labels"`
	Assignee    *leanUser              `json:"assignee"`
	Assignees   leanList[leanUser]     `json:"assignees"`
	PullRequest *struct{ Merged bool } `json:"pull_request"`
	UpdatedAt   hookTime               `json:"updated_at"`
}

type leanPull struct {
	Number         int64               `json:"number"`
	User           leanUser            `json:"user"`
	Title          string              `json:"title"`
	Body           string              `json:"body"`
	State          string              `json:"state"`
	Labels         leanList[leanLabel] `json:"labels"`
	Assignee       *leanUser           `json:"assignee"`
	Assignees      leanList[leanUser]  `json:"assignees"`
	Head           hookBranch          `json:"head"`
	Base           hookBranch          `json:"base"`
	Merged         bool                `json:"merged"`
	MergeCommitSHA string              `json:"merge_commit_sha"`
	HTMLURL        string              `json:"html_url"`
	UpdatedAt      hookTime            `json:"updated_at"`
}

type leanComment struct {
	ID        int64    `json:"id"`
	Body      string   `json:"body"`
	User      leanUser `json:"user"`
	CreatedAt hookTime `json:"created_at"`
	UpdatedAt hookTime `json:"updated_at"`
}

// leanUser has hookUser's fields, so one converts to the other.
type leanUser struct {
	ID       int64  `json:"id"`
	Login    string `json:"login"`
	Username string `json:"username"`
}

type leanLabel struct {
	Name string `json:"name"`
}

// leanList is hookList without its tolerance: an item of the wrong type is an error. It has one
// decoder for each library, so that each decodes the items itself: UnmarshalJSON for
// encoding/json, UnmarshalJSONFrom for github.com/goccy/go-json (which calls it first).
type leanList[T any] struct {
	Present bool
	Items   []T
}

// UnmarshalJSON decodes a JSON array, or null (an empty list), with encoding/json; the list is
// present either way.
func (l *leanList[T]) UnmarshalJSON(b []byte) error {
	l.Present = true
	l.Items = nil
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	return json.Unmarshal(b, &l.Items)
}

// UnmarshalJSONFrom decodes what UnmarshalJSON decodes, with github.com/goccy/go-json: it reads
// the value from dec, with the options of encoding/json that dec carries.
func (l *leanList[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	l.Present = true
	l.Items = nil
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	return gojsonv2.UnmarshalDecode(dec, &l.Items)
}

// decodeHook decodes body into p: through the lean types when the payload has the usual shape,
// with github.com/goccy/go-json (fastjson), else with encoding/json as before, which tries the
// lean types and then the lenient hookBody types, whose error, if any, it returns.
func decodeHook(body []byte, p *hookBody) error {
	var lean leanBody
	err := fastjson.Decode(body, &lean)
	if err != nil {
		lean = leanBody{}
		err = json.Unmarshal(body, &lean)
	}
	if err == nil {
		lean.into(p)
		return nil
	}
	*p = hookBody{}
	return json.Unmarshal(body, p)
}

// into copies the lean decoding into p, as the lenient types would have decoded it.
func (l *leanBody) into(p *hookBody) {
	*p = hookBody{
		Action: l.Action, Number: l.Number, CommitID: l.CommitID, IsPull: l.IsPull,
		Review: l.Review, Sender: hookUser(l.Sender),
		ID: l.ID, SHA: l.SHA, State: l.State, Context: l.Context, TargetURL: l.TargetURL,
		CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt,
	}
	p.Repository.FullName, p.Repository.Name = l.Repository.FullName, l.Repository.Name
	p.Repository.Owner = hookUser(l.Repository.Owner)
	p.RequestedReviewer = leanUserPtr(l.RequestedReviewer)
	if is := l.Issue; is != nil {
		p.Issue = &hookIssue{
			Number: is.Number, User: hookUser(is.User), Title: is.Title, Body: is.Body,
			State: is.State, Labels: leanLabels(is.Labels), Assignee: leanUserPtr(is.Assignee),
			Assignees: leanUsers(is.Assignees), PullRequest: is.PullRequest,
			UpdatedAt: is.UpdatedAt,
		}
	}
	if pr := l.PullRequest; pr != nil {
		p.PullRequest = &hookPull{
			Number: pr.Number, User: hookUser(pr.User), Title: pr.Title, Body: pr.Body,
			State: pr.State, Labels: leanLabels(pr.Labels), Assignee: leanUserPtr(pr.Assignee),
			Assignees: leanUsers(pr.Assignees), Head: pr.Head, Base: pr.Base, Merged: pr.Merged,
			MergeCommitSHA: pr.MergeCommitSHA, HTMLURL: pr.HTMLURL,
			UpdatedAt: pr.UpdatedAt,
		}
	}
	if c := l.Comment; c != nil {
		p.Comment = &hookComment{
			ID: c.ID, Body: c.Body, User: hookUser(c.User),
			CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		}
	}
}

func leanUserPtr(u *leanUser) *hookUser {
	if u == nil {
		return nil
	}
	h := hookUser(*u)
	return &h
}

// leanItems converts a lean list item by item, keeping presence and an empty list's non-nil slice.
func leanItems[L, H any](l leanList[L], conv func(L) H) hookList[H] {
	out := hookList[H]{Present: l.Present}
	if l.Items != nil {
		out.Items = make([]H, 0, len(l.Items))
	}
	for _, x := range l.Items {
		out.Items = append(out.Items, conv(x))
	}
	return out
}

func leanUsers(l leanList[leanUser]) hookList[hookUser] {
	return leanItems(l, func(u leanUser) hookUser { return hookUser(u) })
}

func leanLabels(l leanList[leanLabel]) hookList[hookLabel] {
	return leanItems(l, func(x leanLabel) hookLabel { return hookLabel(x) })
}
