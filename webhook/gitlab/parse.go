package gitlab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// hookEnvelope is the part every GitLab webhook body shares; it is decoded first, for routing,
// the repository and the sender.
type hookEnvelope struct {
	ObjectKind string `json:"object_kind"`
	EventType  string `json:"event_type"`
	EventName  string `json:"event_name"` // system hooks
	User       *struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
		Bot      bool   `json:"bot"` // not in the documented payload; honoured if GitLab sends it
	} `json:"user"`
	UserID       int64  `json:"user_id"`       // push payloads
	UserUsername string `json:"user_username"` // push payloads
	Project      struct {
		PathWithNamespace string `json:"path_with_namespace"`
		WebURL            string `json:"web_url"`
	} `json:"project"`
	ObjectAttributes struct {
		Action       string `json:"action"`
		NoteableType string `json:"noteable_type"`
	} `json:"object_attributes"`
}

// hookKindByHeader is the object_kind a hook header implies, used when a body lacks object_kind.
var hookKindByHeader = map[string]string{
	string(gl.EventTypeIssue):         "issue",
	string(gl.EventConfidentialIssue): "issue",
	string(gl.EventTypeNote):          "note",
	string(gl.EventConfidentialNote):  "note",
	string(gl.EventTypeMergeRequest):  "merge_request",
	string(gl.EventTypePipeline):      "pipeline",
	string(gl.EventTypeJob):           "build",
	string(gl.EventTypeBuild):         "build",
	string(gl.EventTypePush):          "push",
	string(gl.EventTypeTagPush):       "tag_push",
	string(gl.EventTypeEmoji):         "emoji",
}

// parseHook routes on object_kind. ev carries Kind, Header and DeliveryID.
func parseHook(ev forge.Event, body []byte) (forge.Event, error) {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return ev, fmt.Errorf("%w: %s body is not a JSON object", forge.ErrBadPayload, ev.Header)
	}
	var env hookEnvelope
	if err := hookDecode(body, &env); err != nil {
		return ev, fmt.Errorf("%w: decoding %s body: %v", forge.ErrBadPayload, ev.Header, err)
	}
	ev.Action = env.ObjectAttributes.Action
	ev.Target.Repo = env.Project.PathWithNamespace
	switch {
	case env.User != nil:
		ev.Sender = forge.User{ID: env.User.ID, Login: env.User.Username, Bot: env.User.Bot}
	case env.UserUsername != "":
		ev.Sender = forge.User{ID: env.UserID, Login: env.UserUsername}
	}

	kind := env.ObjectKind
	if kind == "" {
		kind = hookKindByHeader[ev.Header]
	}
	switch kind {
	case "issue":
		return parseIssueHook(ev, body)
	case "note":
		return parseNoteHook(ev, body, env.ObjectAttributes.NoteableType)
	case "merge_request":
		return parseMergeRequestHook(ev, body)
	case "pipeline":
		return parsePipelineHook(ev, body, env.Project.WebURL)
	case "build":
		return ev, forge.Ignore(ev.Header, "job events are not used; CI is followed through pipeline events")
	case "push":
		return ev, forge.Ignore(ev.Header, "push events are not used")
	case "tag_push":
		return ev, forge.Ignore(ev.Header, "tag push events are not used")
	case "emoji":
		return ev, forge.Ignore(ev.Header, "emoji reactions are not used")
	case "work_item":
		return ev, forge.Ignore(ev.Header, "work items other than issues are not used")
	case "":
		if env.EventName != "" {
			return ev, forge.Ignore(ev.Header, "system hook event %q is not used", env.EventName)
		}
		return ev, forge.Ignore(ev.Header, "%s events are not used", ev.Header)
	default:
		return ev, forge.Ignore(ev.Header, "%q events are not used", kind)
	}
}

// hookRequireTarget rejects a body whose repository or number is missing: such a delivery cannot be
// routed to a mailbox.
func hookRequireTarget(ev forge.Event, what string) error {
	if ev.Target.Repo == "" || ev.Target.Number <= 0 {
		return fmt.Errorf("%w: %s without project path or iid", forge.ErrBadPayload, what)
	}
	return nil
}

func parseIssueHook(ev forge.Event, body []byte) (forge.Event, error) {
	var e gl.IssueEvent
	if err := hookDecode(body, &e); err != nil {
		return ev, fmt.Errorf("%w: decoding issue event: %v", forge.ErrBadPayload, err)
	}
	oa := e.ObjectAttributes
	ev.Action = oa.Action
	ev.Target.Number = oa.IID
	if err := hookRequireTarget(ev, "issue event"); err != nil {
		return ev, err
	}
	ev.Title, ev.Body, ev.State = oa.Title, oa.Description, hookState(oa.State)
	ev.Author = hookAuthor(oa.AuthorID, ev.Sender)
	ev.OccurredAt = hookTime(oa.UpdatedAt)

	labels := e.Labels
	if labels == nil {
		labels = oa.Labels
	}
	if labels != nil {
		ev.LabelsKnown, ev.Labels = true, hookLabelTitles(labels)
	}
	if e.Assignees != nil {
		ev.AssigneesKnown, ev.Assignees = true, hookUserLogins(hookPtrs(*e.Assignees))
	}

	switch oa.Action {
	case "open":
		ev.Type = forge.EventIssueOpened
	case "close":
		ev.Type = forge.EventIssueClosed
	case "reopen":
		ev.Type = forge.EventIssueReopened
	case "update":
		ch := e.Changes
		prevLabels, curLabels := hookLabelTitles(ch.Labels.Previous), hookLabelTitles(ch.Labels.Current)
		prevAssignees, curAssignees := hookUserLogins(ch.Assignees.Previous), hookUserLogins(ch.Assignees.Current)
		// Compare previous with current instead of trusting the key's presence (fixtures carry
		// unchanged changes.labels).
		switch {
		case !hookSameSet(prevLabels, curLabels):
			ev.Type = forge.EventLabels
			ev.PreviousLabels = hookNonNil(prevLabels)
			if !ev.LabelsKnown {
				ev.LabelsKnown, ev.Labels = true, curLabels
			}
		case !hookSameSet(prevAssignees, curAssignees):
			ev.Type = forge.EventAssignees
			ev.PreviousAssignees = hookNonNil(prevAssignees)
			if !ev.AssigneesKnown {
				ev.AssigneesKnown, ev.Assignees = true, curAssignees
			}
		case ch.Title.Previous != ch.Title.Current || ch.Description.Previous != ch.Description.Current:
			ev.Type = forge.EventIssueEdited
		default:
			return ev, forge.Ignore(ev.Header, "issue update changes nothing Alfred uses (changed: %s)", hookChangedKeys(body))
		}
	case "":
		return ev, forge.Ignore(ev.Header, "issue event without action")
	default:
		return ev, forge.Ignore(ev.Header, "issue action %q is not used", oa.Action)
	}
	return ev, nil
}

func parseNoteHook(ev forge.Event, body []byte, noteableType string) (forge.Event, error) {
	var (
		attrs  gl.IssueCommentEventObjectAttributes
		target string
		thread string
		pos    *forge.Position
	)
	switch noteableType {
	case "Issue":
		var e gl.IssueCommentEvent
		if err := hookDecode(body, &e); err != nil {
			return ev, fmt.Errorf("%w: decoding issue note event: %v", forge.ErrBadPayload, err)
		}
		attrs, target = e.ObjectAttributes, "issue"
		is := e.Issue
		ev.Target.Number = is.IID
		ev.Title, ev.Body, ev.State = is.Title, is.Description, hookState(is.State)
		ev.Author = hookAuthor(is.AuthorID, ev.Sender)
		if is.Labels != nil {
			ev.LabelsKnown, ev.Labels = true, hookLabelTitles(is.Labels)
		}
	case "MergeRequest":
		var e gl.MergeCommentEvent
		if err := hookDecode(body, &e); err != nil {
			return ev, fmt.Errorf("%w: decoding merge request note event: %v", forge.ErrBadPayload, err)
		}
		oa := e.ObjectAttributes
		attrs = gl.IssueCommentEventObjectAttributes{
			ID: oa.ID, Note: oa.Note, System: oa.System, Action: oa.Action,
			CreatedAt: oa.CreatedAt, UpdatedAt: oa.UpdatedAt,
		}
		target = "merge request"
		mr := e.MergeRequest
		ev.Target.Number, ev.Target.MergeRequest = mr.IID, true
		ev.Title, ev.Body, ev.State = mr.Title, mr.Description, hookState(mr.State)
		ev.Author = hookAuthor(mr.AuthorID, ev.Sender)
		if mr.Labels != nil {
			ev.LabelsKnown, ev.Labels = true, hookLabelTitles(mr.Labels)
		}
		ev.MergeRequest = &forge.MergeRequest{
			Number: mr.IID, Title: mr.Title, Body: mr.Description,
			SourceBranch: mr.SourceBranch, TargetBranch: mr.TargetBranch, HeadSHA: mr.LastCommit.ID,
			State: hookMRState(mr.State), Merged: mr.State == "merged", WebURL: mr.URL, Author: ev.Author,
			MergeStatus: hookMergeStatus(mr.DetailedMergeStatus, mr.MergeStatus),
		}
		thread, pos = oa.DiscussionID, hookNotePosition(oa.Type, oa.Position)
	case "Commit", "Snippet":
		return ev, forge.Ignore(ev.Header, "comments on a %s are not used", strings.ToLower(noteableType))
	default:
		return ev, forge.Ignore(ev.Header, "comments on %q are not used", noteableType)
	}
	if err := hookRequireTarget(ev, "note event"); err != nil {
		return ev, err
	}
	if attrs.System {
		return ev, forge.Ignore(ev.Header, "system notes are not used")
	}
	ev.Action = string(attrs.Action)
	ev.Comment = &forge.Comment{
		ID: attrs.ID, Body: attrs.Note, Author: ev.Sender,
		CreatedAt: hookTime(attrs.CreatedAt), UpdatedAt: hookTime(attrs.UpdatedAt),
		Thread: thread, Position: pos,
	}
	ev.OccurredAt = ev.Comment.UpdatedAt
	switch attrs.Action {
	case gl.CommentEventActionCreate, "": // no action before GitLab 16.11
		ev.Type = forge.EventComment
	case gl.CommentEventActionUpdate:
		ev.Type = forge.EventCommentEdited
	default:
		return ev, forge.Ignore(ev.Header, "%s note action %q is not used", target, attrs.Action)
	}
	return ev, nil
}

func parseMergeRequestHook(ev forge.Event, body []byte) (forge.Event, error) {
	var e gl.MergeEvent
	if err := hookDecode(body, &e); err != nil {
		return ev, fmt.Errorf("%w: decoding merge request event: %v", forge.ErrBadPayload, err)
	}
	oa := e.ObjectAttributes
	ev.Action = oa.Action
	ev.Target.Number, ev.Target.MergeRequest = oa.IID, true
	if err := hookRequireTarget(ev, "merge request event"); err != nil {
		return ev, err
	}
	ev.Title, ev.Body, ev.State = oa.Title, oa.Description, hookState(oa.State)
	ev.Author = hookAuthor(oa.AuthorID, ev.Sender)
	ev.OccurredAt = hookTime(oa.UpdatedAt)
	ev.MergeRequest = &forge.MergeRequest{
		Number: oa.IID, Title: oa.Title, Body: oa.Description,
		SourceBranch: oa.SourceBranch, TargetBranch: oa.TargetBranch, HeadSHA: oa.LastCommit.ID,
		State: hookMRState(oa.State), Merged: oa.State == "merged", WebURL: oa.URL, Author: ev.Author,
		MergeStatus: hookMergeStatus(oa.DetailedMergeStatus, oa.MergeStatus),
	}
	labels := e.Labels
	if labels == nil {
		labels = oa.Labels
	}
	if labels != nil {
		ev.LabelsKnown, ev.Labels = true, hookLabelTitles(labels)
	}
	if e.Assignees != nil {
		ev.AssigneesKnown, ev.Assignees = true, hookUserLogins(e.Assignees)
	}

	switch oa.Action {
	case "open", "reopen":
		ev.Type = forge.EventMergeRequestOpened
	case "merge":
		ev.Type = forge.EventMergeRequestMerged
		ev.MergeRequest.State, ev.MergeRequest.Merged = "merged", true
	case "close":
		ev.Type = forge.EventMergeRequestClosed
	case "approved":
		ev.Type, ev.Review = forge.EventReview, &forge.Review{State: "approved"}
	case "unapproved":
		ev.Type, ev.Review = forge.EventReview, &forge.Review{State: "unapproved"}
	case "approval", "unapproval":
		return ev, forge.Ignore(ev.Header, "single-user %s is not used; approved/unapproved report the merge request's approval state", oa.Action)
	case "update":
		ch := e.Changes
		prevLabels, curLabels := hookLabelTitles(ch.Labels.Previous), hookLabelTitles(ch.Labels.Current)
		prevAssignees, curAssignees := hookUserLogins(ch.Assignees.Previous), hookUserLogins(ch.Assignees.Current)
		switch {
		case oa.OldRev != "":
			ev.Type = forge.EventMergeRequestUpdated
		case !hookSameSet(prevLabels, curLabels):
			ev.Type = forge.EventLabels
			ev.PreviousLabels = hookNonNil(prevLabels)
			if !ev.LabelsKnown {
				ev.LabelsKnown, ev.Labels = true, curLabels
			}
		case !hookSameSet(prevAssignees, curAssignees):
			ev.Type = forge.EventAssignees
			ev.PreviousAssignees = hookNonNil(prevAssignees)
			if !ev.AssigneesKnown {
				ev.AssigneesKnown, ev.Assignees = true, curAssignees
			}
		default:
			return hookMergeRequestUpdate(ev, body, &e)
		}
	case "":
		return ev, forge.Ignore(ev.Header, "merge request event without action")
	default:
		return ev, forge.Ignore(ev.Header, "merge request action %q is not used", oa.Action)
	}
	return ev, nil
}

func parsePipelineHook(ev forge.Event, body []byte, projectURL string) (forge.Event, error) {
	var e gl.PipelineEvent
	if err := hookDecode(body, &e); err != nil {
		return ev, fmt.Errorf("%w: decoding pipeline event: %v", forge.ErrBadPayload, err)
	}
	oa := e.ObjectAttributes
	ev.Action = oa.Status
	if ev.Target.Repo == "" || oa.ID <= 0 {
		return ev, fmt.Errorf("%w: pipeline event without project path or pipeline id", forge.ErrBadPayload)
	}
	ev.Type = forge.EventPipeline
	p := &forge.Pipeline{
		ID: oa.ID, State: hookCIState(oa.Status), SHA: oa.SHA, Ref: oa.Ref, WebURL: oa.URL,
		MergeRequest: e.MergeRequest.IID,
	}
	if p.WebURL == "" && projectURL != "" {
		p.WebURL = fmt.Sprintf("%s/-/pipelines/%d", strings.TrimSuffix(projectURL, "/"), oa.ID)
	}
	ev.Pipeline = p
	if mr := e.MergeRequest; mr.IID > 0 {
		ev.Target.Number, ev.Target.MergeRequest = mr.IID, true
		ev.Title = mr.Title
		ev.MergeRequest = &forge.MergeRequest{
			Number: mr.IID, Title: mr.Title, SourceBranch: mr.SourceBranch, TargetBranch: mr.TargetBranch,
			HeadSHA: oa.SHA, State: hookMRState(mr.State), Merged: mr.State == "merged", WebURL: mr.URL,
		}
	}
	ev.OccurredAt = hookTime(oa.FinishedAt)
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = hookTime(oa.CreatedAt)
	}
	return ev, nil
}

// hookCIState maps a GitLab pipeline status to a CIState.
func hookCIState(status string) forge.CIState {
	switch status {
	case "success":
		return forge.CISuccess
	case "failed", "canceled", "canceling":
		return forge.CIFailed
	case "skipped", "manual":
		return forge.CISkipped
	default: // created, waiting_for_resource, preparing, pending, running, scheduled
		return forge.CIPending
	}
}

// hookState maps a GitLab issue or merge request state to "open" / "closed".
func hookState(s string) string {
	switch s {
	case "opened", "locked", "reopened":
		return "open"
	case "closed", "merged":
		return "closed"
	default:
		return s
	}
}

// hookMRState maps a GitLab merge request state to "open", "closed" or "merged".
func hookMRState(s string) string {
	if s == "merged" {
		return "merged"
	}
	return hookState(s)
}

// hookAuthor builds the author from an author_id; GitLab payloads give no author login, but
// when the sender is the author the login is known.
func hookAuthor(id int64, sender forge.User) forge.User {
	if id != 0 && id == sender.ID {
		return sender
	}
	return forge.User{ID: id}
}

func hookLabelTitles(ls []*gl.EventLabel) []string {
	var out []string
	for _, l := range ls {
		if l != nil && l.Title != "" {
			out = append(out, l.Title)
		}
	}
	return out
}

func hookUserLogins(us []*gl.EventUser) []string {
	var out []string
	for _, u := range us {
		if u != nil && u.Username != "" {
			out = append(out, u.Username)
		}
	}
	return out
}

func hookPtrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// hookNonNil turns nil into an empty list, so that "previously none" differs from "not said".
func hookNonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func hookSameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// hookChangedKeys lists the keys of the body's "changes" object, for an ignore reason.
func hookChangedKeys(body []byte) string {
	var b struct {
		Changes map[string]json.RawMessage `json:"changes"`
	}
	_ = json.Unmarshal(body, &b)
	keys := make([]string, 0, len(b.Changes))
	for k := range b.Changes {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "nothing"
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// hookTimeLayouts are the timestamp formats seen in GitLab payloads, sometimes several in one
// body (fixtures README quirk 9).
var hookTimeLayouts = []string{
	time.RFC3339Nano,                // 2013-12-03T17:15:43Z, …T…:…:….123Z, …T…+02:00
	"2006-01-02 15:04:05 MST",       // 2017-12-10 16:41:28 UTC
	"2006-01-02 15:04:05 -0700",     // 2021-04-28 21:50:00 +0200 (docs)
	"2006-01-02 15:04:05.999 -0700", // fractional variant
	"2006-01-02T15:04:05.999",       // no zone: taken as UTC
	"2006-01-02 15:04:05",
}

// hookTime parses a GitLab timestamp leniently; an unknown format gives the zero time.
func hookTime(s string) time.Time {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}
	}
	for _, layout := range hookTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// hookTimeKeys are keys that client-go decodes into time.Time or ISOTime; Alfred uses none of
// them, so when a body has a format those types reject, they are dropped (see hookDecode).
var hookTimeKeys = map[string]bool{
	"timestamp": true, "due_date": true, "start_date": true, "expires_at": true,
}

// hookDecode unmarshals body into v leniently. client-go's event structs are strict about a
// few types (time.Time fields, strings that GitLab sometimes sends as numbers):
//   - a value of the wrong type is skipped and the rest decoded (encoding/json does so and
//     reports an *json.UnmarshalTypeError, which is not treated as a failure here);
//   - a time Alfred does not use that a time type rejects aborts encoding/json, so those keys are
//     dropped and decoding is retried.
//
// One odd field Alfred does not read thus cannot make a whole delivery unreadable. A body that is
// not JSON is still an error.
func hookDecode(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if err == nil || hookIsTypeError(err) {
		return nil
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return err
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&tree) != nil {
		return err
	}
	hookDeleteKeys(tree, hookTimeKeys)
	if m, ok := tree.(map[string]any); ok {
		// Alfred reads the sender and the repository from hookEnvelope, not from these.
		delete(m, "user")
		delete(m, "repository")
	}
	pruned, merr := json.Marshal(tree)
	if merr != nil {
		return err
	}
	reflect.ValueOf(v).Elem().SetZero()
	if err2 := json.Unmarshal(pruned, v); err2 != nil && !hookIsTypeError(err2) {
		return err
	}
	return nil
}

func hookIsTypeError(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr)
}

// hookDeleteKeys removes every key in keys at any depth.
func hookDeleteKeys(node any, keys map[string]bool) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if keys[k] {
				delete(n, k)
				continue
			}
			hookDeleteKeys(v, keys)
		}
	case []any:
		for _, el := range n {
			hookDeleteKeys(el, keys)
		}
	}
}
