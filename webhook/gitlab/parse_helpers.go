package gitlab

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/internal/fastjson"
)

// hookCIState maps a GitLab pipeline status to a CIState.
func hookCIState(status string) forge.CIState {
	switch status {
	case "success":
		return forge.CISuccess
	case "failed":
		return forge.CIFailed
	case "canceled", "canceling":
		return forge.CICanceled
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

// hookTime parses a GitLab timestamp leniently; an unknown format, or a year JSON cannot
// write (forge.StorableTime), gives the zero time.
func hookTime(s string) time.Time {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}
	}
	for _, layout := range hookTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return forge.StorableTime(t.UTC())
		}
	}
	return time.Time{}
}

// hookTimeKeys are keys that client-go decodes into time.Time or ISOTime; Alfred uses none of
// them, so when a body has a format those types reject, they are dropped (see hookDecode).
var hookTimeKeys = map[string]bool{
	"timestamp": true, "due_date": true, "start_date": true, "expires_at": true,
}

// hookDecode unmarshals body into v (a pointer to client-go's event type or to hookEnvelope)
// leniently. A body that github.com/goccy/go-json decodes without any error (fastjson) is done in
// one pass; any other is decoded again from the zero value with encoding/json, as follows
// (FuzzFastDecode holds the two libraries to the same value). client-go's event structs are
// strict about a few types (time.Time fields, strings that GitLab sometimes sends as numbers):
//   - a value of the wrong type is skipped and the rest decoded (encoding/json does so and
//     reports an *json.UnmarshalTypeError, which is not treated as a failure here);
//   - a time Alfred does not use that a time type rejects aborts encoding/json, so those keys are
//     dropped and decoding is retried.
//
// One odd field Alfred does not read thus cannot make a whole delivery unreadable. A body that is
// not JSON is still an error.
func hookDecode(body []byte, v any) error {
	if fastjson.Decode(body, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
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

// hookListChange makes ev a labels event when the labels changed, else an assignees event when
// the assignees changed, with the previous list and (unless the body already gave it) the
// current one; it reports whether either changed. Previous and current are compared rather
// than trusting a key's presence: GitLab sends unchanged changes.labels too. One update can
// change both (quick actions "/assign @bot /label ~x" in one comment, one delivery): the labels
// event then carries the assignee change too (PreviousAssignees and Assignees), which the
// mailbox applies after the labels.
func hookListChange(ev *forge.Event, prevLabels, curLabels, prevAssignees, curAssignees []string) bool {
	labels, assignees := !hookSameSet(prevLabels, curLabels), !hookSameSet(prevAssignees, curAssignees)
	if labels {
		ev.Type = forge.EventLabels
		ev.PreviousLabels = hookNonNil(prevLabels)
		if !ev.LabelsKnown {
			ev.LabelsKnown, ev.Labels = true, curLabels
		}
	}
	if assignees {
		if !labels {
			ev.Type = forge.EventAssignees
		}
		ev.PreviousAssignees = hookNonNil(prevAssignees)
		if !ev.AssigneesKnown {
			ev.AssigneesKnown, ev.Assignees = true, curAssignees
		}
	}
	return labels || assignees
}

// hookFromFork reports whether a merge request's source project is another than its target (a
// fork's), when the payload gives both.
func hookFromFork(source, target int64) bool {
	return source != 0 && target != 0 && source != target
}

// hookKindAlias reports whether a body of object_kind body is one GitLab sends under a header
// that implies kind: work items arrive as Issue Hooks.
func hookKindAlias(kind, body string) bool {
	return kind == "issue" && body == "work_item"
}

// hookInternalNote reports whether a note delivery is of an internal note (GitLab sends it as a
// Confidential Note Hook with object_attributes.internal, or confidential before GitLab 15.0,
// set; a note on a confidential issue comes under the same header with both unset).
func hookInternalNote(body []byte) bool {
	var n struct {
		ObjectAttributes struct {
			Internal     bool `json:"internal"`
			Confidential bool `json:"confidential"`
		} `json:"object_attributes"`
	}
	return hookDecode(body, &n) == nil && (n.ObjectAttributes.Internal || n.ObjectAttributes.Confidential)
}
