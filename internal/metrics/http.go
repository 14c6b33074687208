package metrics

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DeliveryMiddleware counts the deliveries answered by next, the webhook receiver mounted at
// "/webhooks/{forge}". The forge label is the path's forge name when it is one of forges, else
// "unknown"; the event label is the forge's event header (X-Gitlab-Event; Forgejo's and
// Gitea's X-…-Event-Type, else X-…-Event) normalised to lower case with '_' for spaces, "other" for a value outside the
// forges' documented event names and "unverified" for a delivery answered 401, so that a
// sender without the secret cannot grow the label set. The answer label is the receiver's
// JSON "status" (accepted, ignored, duplicate) or, for an error, a name of the HTTP status.
// Requests to other paths pass through uncounted.
func (m *Metrics) DeliveryMiddleware(forges []string, next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	known := map[string]bool{}
	for _, f := range forges {
		known[f] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/webhooks/")
		if !ok || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if !known[name] {
			name = "unknown"
		}
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		event := EventName(r.Header)
		if rec.status == http.StatusUnauthorized {
			event = "unverified"
		}
		m.Delivery(name, event, answer(rec.status, rec.head.Bytes()), time.Since(start))
	})
}

// recorder keeps the status and the first bytes of the body of an answer.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	head   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	if n := 512 - r.head.Len(); n > 0 {
		r.head.Write(p[:min(n, len(p))])
	}
	return r.ResponseWriter.Write(p)
}

// answer names a receiver's answer: its JSON status unless it is "error", else the status.
func answer(status int, body []byte) string {
	var v struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &v) == nil {
		switch v.Status {
		case "accepted", "ignored", "duplicate":
			return v.Status
		}
	}
	switch status {
	case http.StatusAccepted:
		return "accepted"
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized, http.StatusForbidden:
		return "unauthorized"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return strconv.Itoa(status)
}

// knownEvents are the event header values GitLab (docs "Webhook events", X-Gitlab-Event) and
// Forgejo/Gitea (X-Forgejo-Event / X-Gitea-Event, models/webhook HookEventType) send, normalised.
var knownEvents = map[string]bool{
	// GitLab
	"issue_hook": true, "confidential_issue_hook": true, "note_hook": true, "confidential_note_hook": true,
	"merge_request_hook": true, "pipeline_hook": true, "job_hook": true, "push_hook": true,
	"tag_push_hook": true, "system_hook": true, "wiki_page_hook": true, "deployment_hook": true,
	"release_hook": true, "emoji_hook": true, "resource_access_token_hook": true, "member_hook": true,
	// Forgejo / Gitea
	"issues": true, "issue_assign": true, "issue_label": true, "issue_milestone": true,
	"issue_comment": true, "pull_request": true, "pull_request_assign": true,
	"pull_request_label": true, "pull_request_milestone": true, "pull_request_comment": true,
	"pull_request_review_approved": true, "pull_request_review_rejected": true,
	"pull_request_review_comment": true, "pull_request_sync": true, "pull_request_review_request": true,
	"status": true, "push": true, "create": true, "delete": true, "fork": true, "release": true,
	"repository": true, "wiki": true, "workflow_run": true, "workflow_job": true, "package": true,
}

// EventName returns the normalised event header of a delivery (see DeliveryMiddleware), "none"
// when the request has none.
func EventName(h http.Header) string {
	var v string
	for _, k := range []string{"X-Gitlab-Event", "X-Forgejo-Event-Type", "X-Gitea-Event-Type", "X-Forgejo-Event", "X-Gitea-Event"} {
		if v = h.Get(k); v != "" {
			break
		}
	}
	if v == "" {
		return "none"
	}
	v = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(v)), " ", "_")
	if !knownEvents[v] {
		return "other"
	}
	return v
}

// Transport returns a RoundTripper that counts every request to forgeName's API (method and
// path template, status, latency) and passes it to next (http.DefaultTransport when nil).
// Put it under the forge client's retrying transport so that each attempt is counted.
func (m *Metrics) Transport(forgeName string, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if m == nil {
		return next
	}
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := next.RoundTrip(r)
		status := 0
		if err == nil {
			status = resp.StatusCode
		}
		m.ForgeCall(forgeName, Operation(r.Method, r.URL.EscapedPath()), status, time.Since(start))
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var (
	numberSegment = regexp.MustCompile(`^[0-9]+$`)
	shaSegment    = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
)

// Operation turns a forge API request into a bounded label: the method and the path with
// repository, project, user, number, commit and label parts replaced by placeholders
// ("GET /api/v1/repos/{owner}/{repo}/issues/{n}/comments", "PUT /api/v4/projects/{project}/
// issues/{n}"), so that no label names a repository or an issue.
func Operation(method, escapedPath string) string {
	seg := strings.Split(strings.Trim(escapedPath, "/"), "/")
	for i := 0; i < len(seg); i++ {
		switch {
		case seg[i] == "repos" && i+2 < len(seg):
			seg[i+1], seg[i+2] = "{owner}", "{repo}"
			i += 2
		case (seg[i] == "projects" || seg[i] == "groups") && i+1 < len(seg):
			seg[i+1] = "{" + strings.TrimSuffix(seg[i], "s") + "}"
			i++
		case (seg[i] == "users" || seg[i] == "orgs" || seg[i] == "collaborators") && i+1 < len(seg):
			seg[i+1] = "{name}"
			i++
		case (seg[i] == "labels" || seg[i] == "commits" || seg[i] == "statuses" || seg[i] == "branches") && i+1 < len(seg):
			seg[i+1] = "{ref}"
			i++
		case numberSegment.MatchString(seg[i]):
			seg[i] = "{n}"
		case shaSegment.MatchString(seg[i]):
			seg[i] = "{sha}"
		}
	}
	return method + " /" + strings.Join(seg, "/")
}

// StageStats is what an HTTP server's stages hold at one instant (internal/base/httpserve.Stats,
// converted by cmd).
type StageStats struct {
	// Reading, Waiting and Handling count the requests whose body is being read, that wait
	// for a handling slot, and in their handler.
	Reading, Waiting, Handling int64
}

// HTTPStages exports, at scrape time, the requests the named server ("webhook", "admin")
// holds in each stage: alfred_http_requests{server, stage="reading|waiting|handling"}. A
// client trickling its body counts under reading, never under handling. A second call for
// the same server name changes nothing.
func (m *Metrics) HTTPStages(server string, read func() StageStats) {
	if m == nil {
		return
	}
	for stage, v := range map[string]func(StageStats) int64{
		"reading":  func(s StageStats) int64 { return s.Reading },
		"waiting":  func(s StageStats) int64 { return s.Waiting },
		"handling": func(s StageStats) int64 { return s.Handling },
	} {
		_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace,
			Name:        "http_requests",
			Help:        "HTTP requests held now by a server's stages: reading their body, read and waiting for a handling slot, being handled.",
			ConstLabels: prometheus.Labels{"server": server, "stage": stage}},
			func() float64 { return float64(v(read())) }))
	}
}
