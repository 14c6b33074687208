package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
)

// hostileCases is the table of the hostile-input suite (spec/edge.md, "Hostile input").
func hostileCases(t *testing.T) []hostileCase {
	var cs []hostileCase
	cs = append(cs, recordedCases(t)...)
	cs = append(cs, signatureCases(t)...)
	cs = append(cs, malformedCases(t)...)
	cs = append(cs, contentTypeCases(t)...)
	cs = append(cs, sizeCases(t)...)
	cs = append(cs, unknownEventCases(t)...)
	cs = append(cs, textCases(t)...)
	cs = append(cs, oddIDCases(t)...)
	cs = append(cs, missingObjectCases(t)...)
	cs = append(cs, routeCases()...)
	return cs
}

// recordedCases is every recorded delivery, re-signed with the suite's secret and given a
// fresh delivery id: each is stored (202) or ignored (200), never refused.
func recordedCases(t *testing.T) []hostileCase {
	var cs []hostileCase
	err := filepath.WalkDir(hostileFixtureRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") || !strings.Contains(p, "testdata") {
			return err
		}
		if strings.HasPrefix(filepath.Base(p), "api-") {
			return nil // a recorded API answer beside the deliveries, not a delivery
		}
		h, body, err := recorded.Load(p)
		if err != nil {
			return err
		}
		name := filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p)
		base := strings.TrimSuffix(filepath.Base(p), ".json")
		if strings.Contains(filepath.ToSlash(p), "gitlab") {
			event := h.Get("X-Gitlab-Event")
			if event == "" {
				event = gitlabEventOf(body)
			}
			cs = append(cs, glCase("recorded", name, event, body, 200, 202))
			return nil
		}
		event := cmpOrString(h.Get("X-Forgejo-Event-Type"), cmpOrString(h.Get("X-Gitea-Event-Type"), giteaEventOf(base)))
		cs = append(cs, fjCase("recorded", name, event, body, 200, 202))
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(cs), 100, "recorded deliveries not found")
	return cs
}

// gitlabEventOf names the X-Gitlab-Event of a recorded body without headers by its object_kind.
func gitlabEventOf(body []byte) string {
	var d struct {
		ObjectKind string `json:"object_kind"`
	}
	_ = json.Unmarshal(body, &d)
	switch d.ObjectKind {
	case "merge_request":
		return "Merge Request Hook"
	case "build":
		return "Job Hook"
	case "tag_push":
		return "Tag Push Hook"
	case "":
		return "System Hook"
	}
	return strings.ToUpper(d.ObjectKind[:1]) + d.ObjectKind[1:] + " Hook"
}

// giteaEventOf names the fine-grained event type of a recorded Gitea body without headers by
// its file name.
func giteaEventOf(base string) string {
	base = strings.TrimPrefix(base, "forgejo_")
	for _, m := range [][2]string{
		{"issue_comment_created_on_pull_request", "pull_request_comment"},
		{"issue_comment_edited_on_pull_request", "pull_request_comment"},
		{"issue_comment", "issue_comment"}, {"issues_assigned", "issue_assign"},
		{"issues_label", "issue_label"}, {"issues_milestoned", "issue_milestone"}, {"issues", "issues"},
		{"pull_request_review_approved", "pull_request_review_approved"},
		{"pull_request_review_rejected", "pull_request_review_rejected"},
		{"pull_request_review_comment", "pull_request_review_comment"},
		{"pull_request_review_requested", "pull_request_review_request"},
		{"pull_request_label", "pull_request_label"}, {"pull_request_synchronized", "pull_request_sync"},
		{"pull_request_assigned", "pull_request_assign"}, {"pull_request_unassigned", "pull_request_assign"},
		{"pull_request", "pull_request"}, {"push", "push"},
	} {
		if strings.HasPrefix(base, m[0]) {
			return m[1]
		}
	}
	return "issues"
}

func signatureCases(t *testing.T) []hostileCase {
	body := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	good := forgejo.Sign(hostileSecret, body)
	var cs []hostileCase
	sig := func(name string, set func(h http.Header)) {
		c := fjCase("signature", name, "issue_comment", body, 401)
		for _, k := range []string{"X-Forgejo-Signature", "X-Gitea-Signature", "X-Hub-Signature-256"} {
			c.header.Del(k)
		}
		set(c.header)
		cs = append(cs, c)
	}
	sig("missing", func(http.Header) {})
	sig("empty", func(h http.Header) { h.Set("X-Forgejo-Signature", "") })
	sig("wrong-secret", func(h http.Header) { h.Set("X-Forgejo-Signature", forgejo.Sign("other", body)) })
	sig("other-body", func(h http.Header) { h.Set("X-Forgejo-Signature", forgejo.Sign(hostileSecret, body[1:])) })
	sig("truncated", func(h http.Header) { h.Set("X-Forgejo-Signature", good[:32]) })
	sig("one-char-off", func(h http.Header) { h.Set("X-Forgejo-Signature", good[:63]+flipHex(good[63])) })
	sig("not-hex", func(h http.Header) { h.Set("X-Forgejo-Signature", strings.Repeat("zz", 32)) })
	sig("too-long", func(h http.Header) { h.Set("X-Forgejo-Signature", good+"00") })
	sig("8k-header", func(h http.Header) { h.Set("X-Forgejo-Signature", strings.Repeat("a", 8000)) })
	sig("sha1-only", func(h http.Header) { h.Set("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000") })
	sig("gitea-wrong", func(h http.Header) { h.Set("X-Gitea-Signature", forgejo.Sign("x", body)) })
	sig("hub-wrong", func(h http.Header) { h.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64)) })
	sig("hub-prefix-only", func(h http.Header) { h.Set("X-Hub-Signature-256", "sha256=") })
	sig("signature-of-empty", func(h http.Header) { h.Set("X-Forgejo-Signature", forgejo.Sign(hostileSecret, nil)) })
	sig("key-as-signature", func(h http.Header) { h.Set("X-Forgejo-Signature", hostileSecret) })

	gbody := hostileTemplate(t, "gitlab/note_hook_issue.json")
	tok := func(name string, set func(h http.Header)) {
		c := glCase("signature", name, "Note Hook", gbody, 401)
		c.header.Del("X-Gitlab-Token")
		set(c.header)
		cs = append(cs, c)
	}
	tok("gitlab-missing", func(http.Header) {})
	tok("gitlab-empty", func(h http.Header) { h.Set("X-Gitlab-Token", "") })
	tok("gitlab-wrong", func(h http.Header) { h.Set("X-Gitlab-Token", "wrong") })
	tok("gitlab-prefix", func(h http.Header) { h.Set("X-Gitlab-Token", hostileToken[:5]) })
	tok("gitlab-longer", func(h http.Header) { h.Set("X-Gitlab-Token", hostileToken+"x") })
	tok("gitlab-case", func(h http.Header) { h.Set("X-Gitlab-Token", strings.ToUpper(hostileToken)) })
	tok("gitlab-8k", func(h http.Header) { h.Set("X-Gitlab-Token", strings.Repeat("t", 8000)) })
	tok("gitlab-forgejo-sig", func(h http.Header) { h.Set("X-Forgejo-Signature", forgejo.Sign(hostileToken, gbody)) })
	tok("gitlab-bearer", func(h http.Header) { h.Set("Authorization", "Bearer "+hostileToken) })
	// A delivery signed for one forge, sent to the other.
	c := fjCase("signature", "forgejo-to-gitlab", "issue_comment", body, 401)
	c.forge = "gitlab"
	cs = append(cs, c)
	return cs
}

func flipHex(b byte) string {
	if b == '0' {
		return "1"
	}
	return "0"
}

func malformedCases(t *testing.T) []hostileCase {
	fj := bytes.TrimSpace(hostileTemplate(t, "forgejo-live/006-issue_comment-created.json"))
	gl := bytes.TrimSpace(hostileTemplate(t, "gitlab/issue_hook_open.json"))
	var cs []hostileCase
	raw := map[string]string{
		"empty": "", "null": "null", "array": "[]", "string": `"x"`, "number": "42", "true": "true",
		"object-empty": "{}", "open-brace": "{", "garbage": "\x00\x01\x02", "xml": "<xml/>",
		"nested-10000":     strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		"nested-objects":   strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000),
		"trailing-garbage": string(fj) + "garbage", "two-documents": string(fj) + string(fj),
		"bom": "\xef\xbb\xbf" + string(fj), "utf16": "\xff\xfe{\x00}\x00",
	}
	for name, b := range raw {
		cs = append(cs, fjCase("malformed", "forgejo-"+name, "issue_comment", []byte(b), 400, 200))
		cs = append(cs, glCase("malformed", "gitlab-"+name, "Issue Hook", []byte(b), 400, 200))
	}
	for _, cut := range []int{1, 10, len(fj) / 2, len(fj) - 1} {
		cs = append(cs, fjCase("malformed", fmt.Sprintf("forgejo-truncated-%d", cut), "issue_comment", fj[:cut], 400))
	}
	for _, cut := range []int{1, 10, len(gl) / 2, len(gl) - 1} {
		cs = append(cs, glCase("malformed", fmt.Sprintf("gitlab-truncated-%d", cut), "Issue Hook", gl[:cut], 400))
	}
	wrongType := func(name string, edit func(map[string]any)) {
		// The parsers read a value of the wrong type as missing (their doc): stored or refused.
		cs = append(cs, fjCase("malformed", "forgejo-"+name, "issue_comment", jsonEdit(t, fj, edit), 400, 200, 202))
	}
	wrongType("issue-is-string", func(d map[string]any) { d["issue"] = "x" })
	wrongType("issue-is-array", func(d map[string]any) { d["issue"] = []any{1} })
	wrongType("number-is-string", func(d map[string]any) { at(d, "issue")["number"] = "1" })
	wrongType("comment-body-is-object", func(d map[string]any) { at(d, "comment")["body"] = map[string]any{} })
	wrongType("labels-is-object", func(d map[string]any) { at(d, "issue")["labels"] = map[string]any{"a": 1} })
	wrongType("sender-is-number", func(d map[string]any) { d["sender"] = 7 })
	wrongType("action-is-number", func(d map[string]any) { d["action"] = 7 })
	glType := func(name string, edit func(map[string]any)) {
		cs = append(cs, glCase("malformed", "gitlab-"+name, "Issue Hook", jsonEdit(t, gl, edit), 400, 200, 202))
	}
	glType("object-attributes-string", func(d map[string]any) { d["object_attributes"] = "x" })
	glType("iid-is-string", func(d map[string]any) { at(d, "object_attributes")["iid"] = "1" })
	glType("labels-is-string", func(d map[string]any) { d["labels"] = "x" })
	glType("project-is-array", func(d map[string]any) { d["project"] = []any{} })
	glType("user-is-string", func(d map[string]any) { d["user"] = "root" })
	return cs
}

func contentTypeCases(t *testing.T) []hostileCase {
	fj := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	gl := hostileTemplate(t, "gitlab/note_hook_issue.json")
	var cs []hostileCase
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"application/json; charset=latin1", "application/xml", "application/json, text/plain", ";;;"} {
		want := []int{202}
		if ct == "application/x-www-form-urlencoded" {
			// A form hook's signature covers its payload field, which this body lacks.
			want = []int{401}
		}
		body := jsonEdit(t, fj, func(d map[string]any) { at(d, "comment")["body"] = "content type " + ct })
		c := fjCase("content-type", "forgejo-"+ct, "issue_comment", body, want...)
		setOrDel(c.header, "Content-Type", ct)
		cs = append(cs, c)
		gbody := jsonEdit(t, gl, func(d map[string]any) { at(d, "object_attributes")["note"] = "content type " + ct })
		g := glCase("content-type", "gitlab-"+ct, "Note Hook", gbody, 202)
		setOrDel(g.header, "Content-Type", ct)
		cs = append(cs, g)
	}
	gz := fjCase("content-type", "gzip-declared-not-gzip", "issue_comment",
		jsonEdit(t, fj, func(d map[string]any) { at(d, "comment")["body"] = "gzip" }), 202)
	gz.header.Set("Content-Encoding", "gzip")
	cs = append(cs, gz)
	return cs
}

func setOrDel(h http.Header, k, v string) {
	if v == "" {
		h.Del(k)
		return
	}
	h.Set(k, v)
}

// sizeCases send bodies at and over the cap. A body of exactly max_body_bytes is stored; one
// byte more is 413, whatever Content-Length says.
func sizeCases(t *testing.T) []hostileCase {
	fj := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	padded := func(n int, fill string) []byte {
		b := jsonEdit(t, fj, func(d map[string]any) { at(d, "comment")["body"] = "" })
		pad := n - len(b)
		fillN := pad / len(jsonString(fill))
		s := strings.Repeat(fill, fillN)
		out := jsonEdit(t, fj, func(d map[string]any) { at(d, "comment")["body"] = s })
		for len(out) < n { // top up with plain spaces
			s += " "
			out = jsonEdit(t, fj, func(d map[string]any) { at(d, "comment")["body"] = s })
		}
		return out
	}
	var cs []hostileCase
	at := padded(hostileMaxBody, "a")
	require.Len(t, at, hostileMaxBody)
	cs = append(cs, fjCase("size", "at-cap", "issue_comment", at, 202))
	over := append(bytes.Clone(at[:len(at)-1]), ' ', '}')
	cs = append(cs, fjCase("size", "cap-plus-one", "issue_comment", over, 413))
	cs = append(cs, fjCase("size", "twice-cap", "issue_comment", padded(2*hostileMaxBody, "a"), 413))
	// Text that escapes to several bytes a character: the stored row must stay bounded.
	cs = append(cs, fjCase("size", "angle-brackets", "issue_comment", padded(hostileMaxBody-64, "<"), 202))
	cs = append(cs, fjCase("size", "control-escapes", "issue_comment", padded(hostileMaxBody-64, "\u0001"), 202))
	// The forges' JSON encoders write U+2028 escaped; a raw one (three bytes) is stored
	// escaped (six).
	ls := bytes.ReplaceAll(padded(hostileMaxBody/2, "\u2028"), []byte(`\u2028`), []byte("\u2028"))
	cs = append(cs, fjCase("size", "line-separators", "issue_comment", ls, 202))
	cs = append(cs, fjCase("size", "emoji", "issue_comment", padded(hostileMaxBody-64, "😀"), 202))
	cs = append(cs, fjCase("size", "quotes", "issue_comment", padded(hostileMaxBody-64, `"\`), 202))
	return cs
}

// jsonString is s as it appears inside a JSON string written without HTML escaping.
func jsonString(s string) string {
	q := jsonQuote(s)
	return q[1 : len(q)-1]
}

func unknownEventCases(t *testing.T) []hostileCase {
	fj := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	gl := hostileTemplate(t, "gitlab/issue_hook_open.json")
	var cs []hostileCase
	for _, ev := range []string{"push", "create", "delete", "fork", "release", "wiki", "repository", "package",
		"workflow_run", "workflow_job", "schedule", "made-up", strings.Repeat("e", 300)} {
		cs = append(cs, fjCase("unknown-event", "forgejo-"+trim(ev), ev, fj, 200))
	}
	for _, action := range []string{"", "archived", "made_up", "opened\u0000", strings.Repeat("a", 1000)} {
		cs = append(cs, fjCase("unknown-event", "forgejo-action-"+trim(action), "issue_comment",
			jsonEdit(t, fj, func(d map[string]any) { d["action"] = action }), 200, 400))
	}
	for _, ev := range []string{"Push Hook", "Tag Push Hook", "Wiki Page Hook", "Deployment Hook", "Release Hook",
		"Feature Flag Hook", "Member Hook", "Subgroup Hook", "Resource Access Token Hook", "Made Up Hook"} {
		cs = append(cs, glCase("unknown-event", "gitlab-"+ev, ev, gl, 200))
	}
	for _, action := range []string{"", "made_up", "migrated"} {
		cs = append(cs, glCase("unknown-event", "gitlab-action-"+action, "Issue Hook",
			jsonEdit(t, gl, func(d map[string]any) { at(d, "object_attributes")["action"] = action }), 200, 202))
	}
	// A known event header with another event's body.
	cs = append(cs, glCase("unknown-event", "gitlab-note-header-issue-body", "Note Hook", gl, 200, 400))
	cs = append(cs, fjCase("unknown-event", "forgejo-pull-header-comment-body", "pull_request", fj, 200, 400))
	// Every pipeline and commit status on a branch that is not Alfred's is ignored.
	pipe := hostileTemplate(t, "gitlab/pipeline_hook_success.json")
	for _, ref := range []string{"main", "develop", "release/1.0"} {
		cs = append(cs, glCase("unknown-event", "gitlab-pipeline-on-"+ref, "Pipeline Hook",
			jsonEdit(t, pipe, func(d map[string]any) {
				at(d, "object_attributes")["ref"] = ref
				d["merge_request"] = nil
			}), 200))
	}
	job := hostileTemplate(t, "gitlab/job_hook_success.json")
	cs = append(cs, glCase("unknown-event", "gitlab-job-on-main", "Job Hook", job, 200))
	for _, ref := range []string{"main", "feature/x"} {
		status := fmt.Appendf(nil, `{"id":1,"sha":"1234567890abcdef1234567890abcdef12345678","context":"ci/build","state":"success",
"description":"ok","target_url":"","branches":[{"name":%q,"commit":{"id":"1234567890abcdef1234567890abcdef12345678"}}],
"commit":{"id":"1234567890abcdef1234567890abcdef12345678"},"repository":{"id":1,"full_name":"acceptance/sandbox","name":"sandbox","owner":{"login":"acceptance"}},
"sender":{"login":"alice","id":2}}`, ref)
		cs = append(cs, fjCase("unknown-event", "forgejo-status-on-"+trim(ref), "status", status, 200))
	}
	return cs
}

func trim(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}

// textCases put unusual text and byte sequences in every free-text field: the delivery is
// stored (text normalised to valid UTF-8 without NUL, spec/edge.md) and processed.
func textCases(t *testing.T) []hostileCase {
	fj := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	gl := hostileTemplate(t, "gitlab/note_hook_issue.json")
	texts := map[string]string{
		"nul":             "a\u0000b",
		"only-nul":        "\u0000",
		"controls":        "\u0001\u0002\u001f\u007f",
		"lone-surrogate":  `RAW:"\ud800x"`,
		"surrogate-pair":  `RAW:"\ud83d\ude00"`,
		"invalid-utf8":    "RAW_BYTES:\xff\xfe\xc0\x80",
		"overlong-nul":    "RAW_BYTES:\xc0\x80",
		"rtl-override":    "\u202egnp.exe",
		"zero-width":      "a\u200b\u200c\u200d\ufeffb",
		"line-separator":  "\u2028\u2029",
		"emoji-zwj":       "👩‍👩‍👧‍👦",
		"combining":       "e" + strings.Repeat("\u0301", 500),
		"html":            "<script>alert(1)</script>",
		"marker-spoof":    "<!-- alfred:plan:1 -->",
		"mention-bot":     "@hostile-bot please @all",
		"noncharacter":    "\uffff\ufffe",
		"private-use":     "\ue000\U000F0000",
		"crlf":            "a\r\nb\rc",
		"backslashes":     strings.Repeat(`\`, 100),
		"long-64k":        strings.Repeat("x", 64<<10),
		"percent":         "%s %d %x %!",
		"sql":             "'); DROP TABLE events; --",
		"replacement":     "\ufffd",
		"max-rune":        "\U0010FFFF",
		"escaped-unicode": "RAW:\"\\u0000\\u001f\"",
	}
	var cs []hostileCase
	for name, s := range texts {
		// Free text is stored, normalised; a login is an identifier: refused when it holds a
		// NUL or is over 255 bytes. (Invalid UTF-8 inside a JSON string is already U+FFFD once
		// decoded.)
		login := []int{202}
		if strings.Contains(s, "\x00") || strings.Contains(s, `\u0000`) || len(s) > 255 {
			login = []int{400}
		}
		for _, field := range []string{"comment.body", "issue.title", "issue.body"} {
			cs = append(cs, fjCase("text", name+"@"+field, "issue_comment", withText(t, fj, field, s), 202))
		}
		cs = append(cs, fjCase("text", name+"@sender.login", "issue_comment", withText(t, fj, "sender.login", s), login...))
		for _, field := range []string{"object_attributes.note", "issue.title"} {
			cs = append(cs, glCase("text", "gitlab-"+name+"@"+field, "Note Hook", withText(t, gl, field, s), 202))
		}
		cs = append(cs, glCase("text", "gitlab-"+name+"@user.username", "Note Hook", withText(t, gl, "user.username", s), login...))
	}
	return cs
}

// withText sets field ("a.b") of body to s. "RAW:" puts the rest into the JSON verbatim (a
// JSON string literal); "RAW_BYTES:" puts the bytes inside the string unescaped.
func withText(t *testing.T, body []byte, field, s string) []byte {
	const hole = "HOSTILE-HOLE-7f3c"
	obj, key, _ := strings.Cut(field, ".")
	out := jsonEdit(t, body, func(d map[string]any) { at(d, obj)[key] = hole })
	switch {
	case strings.HasPrefix(s, "RAW:"):
		return bytes.Replace(out, []byte(`"`+hole+`"`), []byte(strings.TrimPrefix(s, "RAW:")), 1)
	case strings.HasPrefix(s, "RAW_BYTES:"):
		return bytes.Replace(out, []byte(hole), []byte(strings.TrimPrefix(s, "RAW_BYTES:")), 1)
	}
	return bytes.Replace(out, []byte(`"`+hole+`"`), []byte(jsonQuote(s)), 1)
}

func jsonQuote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// oddIDCases use odd delivery ids, idempotency keys, repository names and numbers.
func oddIDCases(t *testing.T) []hostileCase {
	fj := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	gl := hostileTemplate(t, "gitlab/note_hook_issue.json")
	var cs []hostileCase
	for name, id := range map[string]string{
		"long-1k": strings.Repeat("d", 1000), "long-8k": strings.Repeat("d", 8000),
		"invalid-utf8": "id-\xff\xfe", "spaces": "  a b  ", "unicode": "délivrance-😀", "quote": `a"b'c`,
		"percent": "%00%ff", "slash": "../../etc/passwd",
	} {
		want := []int{202}
		if strings.HasPrefix(name, "long") || name == "invalid-utf8" {
			want = []int{400}
		}
		c := fjCase("odd-id", "forgejo-delivery-"+name, "issue_comment", jsonEdit(t, fj, func(d map[string]any) {
			at(d, "comment")["body"] = "delivery " + name
		}), want...)
		c.header.Set("X-Forgejo-Delivery", id)
		c.header.Set("X-Gitea-Delivery", id)
		cs = append(cs, c)
		g := glCase("odd-id", "gitlab-idempotency-"+name, "Note Hook", jsonEdit(t, gl, func(d map[string]any) {
			at(d, "object_attributes")["note"] = "key " + name
		}), want...)
		g.header.Set("Idempotency-Key", id)
		g.header.Set("X-Gitlab-Event-UUID", id)
		cs = append(cs, g)
	}
	for name, repo := range map[string]string{
		"long-300": strings.Repeat("r", 150) + "/" + strings.Repeat("r", 149), "long-10k": "o/" + strings.Repeat("r", 10000),
		"no-slash": "sandbox", "empty": "", "nul": "a\u0000/b", "dots": "../..", "unicode": "ö/😀",
	} {
		want := []int{202, 200, 400}
		if strings.HasPrefix(name, "long-10k") {
			want = []int{400}
		}
		cs = append(cs, fjCase("odd-id", "forgejo-repo-"+name, "issue_comment", jsonEdit(t, fj, func(d map[string]any) {
			at(d, "repository")["full_name"] = repo
		}), want...))
		cs = append(cs, glCase("odd-id", "gitlab-repo-"+name, "Note Hook", jsonEdit(t, gl, func(d map[string]any) {
			at(d, "project")["path_with_namespace"] = repo
		}), want...))
	}
	for name, n := range map[string]string{
		"zero": "0", "negative": "-1", "max-int64": "9223372036854775807", "over-int64": "9223372036854775808",
		"float": "1.5", "exponent": "1e3", "huge-exponent": "1e400", "big-digits": strings.Repeat("9", 400),
		"min-int64": "-9223372036854775808",
	} {
		const hole = 777777777
		body := bytes.Replace(jsonEdit(t, fj, func(d map[string]any) { at(d, "issue")["number"] = hole }),
			fmt.Appendf(nil, "%d", hole), []byte(n), 1)
		cs = append(cs, fjCase("odd-id", "forgejo-number-"+name, "issue_comment", body, 202, 200, 400))
		gbody := bytes.Replace(jsonEdit(t, gl, func(d map[string]any) { at(d, "issue")["iid"] = hole }),
			fmt.Appendf(nil, "%d", hole), []byte(n), 1)
		cs = append(cs, glCase("odd-id", "gitlab-iid-"+name, "Note Hook", gbody, 202, 200, 400))
	}
	return cs
}

// duplicateCases is one delivery sent twice, and its body again under a new delivery id (a
// manual re-delivery): the first is stored, the others are duplicates (200). They are sent in
// order.
func duplicateCases(t *testing.T) []hostileCase {
	fj := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	first := fjCase("duplicate", "first", "issue_comment", jsonEdit(t, fj, func(d map[string]any) {
		at(d, "comment")["body"] = "sent twice"
	}), 202)
	second := first
	second.name, second.want = "same-delivery-id", []int{200}
	// Identical bodies under a new delivery id are a new event (assign, unassign, assign again).
	third := fjCase("duplicate", "same-body-new-id", "issue_comment", first.body, 202)
	return []hostileCase{first, second, third}
}

// missingObjectCases remove the objects a delivery is about.
func missingObjectCases(t *testing.T) []hostileCase {
	fj := hostileTemplate(t, "forgejo-live/006-issue_comment-created.json")
	gl := hostileTemplate(t, "gitlab/note_hook_issue.json")
	mr := hostileTemplate(t, "gitlab/merge_request_hook_open.json")
	pr := hostileTemplate(t, "forgejo-live/015-pull_request-opened.json")
	var cs []hostileCase
	for _, k := range []string{"issue", "comment", "repository", "sender", "action"} {
		for _, v := range []any{nil, map[string]any{}} {
			cs = append(cs, fjCase("missing", fmt.Sprintf("forgejo-%s-%v", k, v), "issue_comment",
				jsonEdit(t, fj, func(d map[string]any) { d[k] = v }), 400, 200, 202))
		}
	}
	for _, k := range []string{"pull_request", "repository", "number"} {
		cs = append(cs, fjCase("missing", "forgejo-pr-"+k, "pull_request",
			jsonEdit(t, pr, func(d map[string]any) { delete(d, k) }), 400, 200, 202))
	}
	for _, k := range []string{"object_attributes", "project", "user", "issue"} {
		cs = append(cs, glCase("missing", "gitlab-note-"+k, "Note Hook",
			jsonEdit(t, gl, func(d map[string]any) { delete(d, k) }), 400, 200, 202))
	}
	for _, k := range []string{"object_attributes", "project", "user"} {
		cs = append(cs, glCase("missing", "gitlab-mr-"+k, "Merge Request Hook",
			jsonEdit(t, mr, func(d map[string]any) { delete(d, k) }), 400, 200, 202))
	}
	cs = append(cs, fjCase("missing", "forgejo-issue-no-user", "issue_comment",
		jsonEdit(t, fj, func(d map[string]any) { delete(at(d, "issue"), "user") }), 400, 200, 202))
	cs = append(cs, fjCase("missing", "forgejo-comment-no-user", "issue_comment",
		jsonEdit(t, fj, func(d map[string]any) { delete(at(d, "comment"), "user") }), 400, 200, 202))
	return cs
}

// routeCases are requests to the wrong place or with the wrong method.
func routeCases() []hostileCase {
	var cs []hostileCase
	add := func(name, method, path string, want int) {
		cs = append(cs, hostileCase{class: "route", name: name, method: method, path: path, forge: "forgejo",
			header: http.Header{}, want: []int{want}})
	}
	add("get-webhook", http.MethodGet, "/webhooks/forgejo", http.StatusMethodNotAllowed)
	add("put-webhook", http.MethodPut, "/webhooks/forgejo", http.StatusMethodNotAllowed)
	add("unknown-forge", http.MethodPost, "/webhooks/github", http.StatusNotFound)
	add("no-forge", http.MethodPost, "/webhooks/", http.StatusNotFound)
	add("root", http.MethodGet, "/", http.StatusNotFound)
	// State is never on the webhook port (spec/edge.md).
	add("status-mailbox-1", http.MethodGet, "/mailboxes/1/session", http.StatusNotFound)
	add("status-mailbox-2", http.MethodGet, "/mailboxes/2/session", http.StatusNotFound)
	add("status-with-bearer", http.MethodGet, "/mailboxes/1/session", http.StatusNotFound)
	add("healthz", http.MethodGet, "/healthz", http.StatusOK)
	add("readyz", http.MethodGet, "/readyz", http.StatusOK)
	return cs
}
