package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// The hostile-input suite drives `alfred serve` (the binary, built by the test) with the real
// store behind it: every recorded delivery, then classes of hostile input (signatures, malformed
// payloads, content types, sizes, unknown events, unusual text and bytes, odd ids and numbers,
// missing objects, slow and idle clients, a burst of concurrent valid deliveries). It checks
// the answers spec/edge.md promises, that no answer is 5xx while the database is up, that the
// process never panics, and that every 202 was stored and later processed.

const (
	hostileSecret  = "hostile-webhook-secret"
	hostileToken   = "hostile-gitlab-token"
	hostileMaxBody = 1 << 20 // max_body_bytes in the suite's configuration
	hostileBurst   = 500
	hostileIdle    = 2 * time.Second // http.idle_timeout in the suite's configuration
	hostileBodyTO  = 3 * time.Second // http.read_timeout in the suite's configuration

	hostileAdminToken = "hostile-admin-token"
)

// hostileCase is one request of the suite.
type hostileCase struct {
	class string
	name  string
	forge string // "forgejo" or "gitlab"
	// header and body of the request; the URL is /webhooks/{forge} unless path is set.
	header http.Header
	body   []byte
	path   string
	method string
	// want lists the acceptable status codes.
	want []int
}

// hostileAnswer is what the server answered to one case.
type hostileAnswer struct {
	c        hostileCase
	status   int
	delivery string
	body     string
}

// hostileEnv is a running `alfred serve` under test.
type hostileEnv struct {
	t     *testing.T
	url   string
	addr  string
	admin string // the admin listener's URL
	db    *sqlx.DB
	log   string // path of the serve log
	// bin, cfg and dsn start `alfred serve` (start); proc is the last one started.
	bin, cfg, dsn string
	proc          *servetest.Process
}

func TestHostileInputs(t *testing.T) {
	// Serial: its burst measures the binary's answers under its own load alone; beside the
	// parallel tests the handling slots fill and some deliveries get 503 (spec/edge.md).
	env := startHostile(t)
	cases := hostileCases(t)
	answers := env.sendAll(cases, 4)
	answers = append(answers, env.sendAll(duplicateCases(t), 1)...)
	answers = append(answers, env.burst(hostileBurst)...)

	slow := env.slowClients()
	idle := env.idleConnections(200)

	byCode := map[int]int{}
	byClass := map[string]map[int]int{}
	var wrong []string
	for _, a := range answers {
		byCode[a.status]++
		if byClass[a.c.class] == nil {
			byClass[a.c.class] = map[int]int{}
		}
		byClass[a.c.class][a.status]++
		if !slices.Contains(a.c.want, a.status) {
			wrong = append(wrong, fmt.Sprintf("%s/%s: %d (want %v) %s", a.c.class, a.c.name, a.status, a.c.want, a.body))
		}
	}
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var report strings.Builder
	fmt.Fprintf(&report, "hostile suite: %d requests + %d slow clients + %d idle connections; answers %v\n",
		len(answers), len(slow), idle.opened, byCode)
	for _, c := range classes {
		fmt.Fprintf(&report, "  %-14s %v\n", c, byClass[c])
	}
	t.Log(report.String())

	fivexx := 0
	for code, n := range byCode {
		if code >= 500 || code < 0 {
			fivexx += n
		}
	}
	assert.Zero(t, fivexx, "5xx (or no) answers while the database is up")
	if len(wrong) > 40 {
		wrong = append(wrong[:40], fmt.Sprintf("… and %d more", len(wrong)-40))
	}
	assert.Empty(t, wrong, "answers that do not match spec/edge.md")
	for _, w := range wrong {
		t.Log("unexpected answer: " + w)
	}
	for _, s := range slow {
		assert.True(t, s.cut, "slow client %s was not cut off: %s", s.name, s.detail)
	}
	assert.Equal(t, idle.opened, idle.closed, "idle keep-alive connections still open after the idle timeout")

	env.requireApplied(answers)
	env.requireAdminPrivate()
	logText, err := os.ReadFile(env.log)
	require.NoError(t, err)
	assert.NotContains(t, string(logText), "panic", "the server panicked")
	var errs []string
	for _, line := range strings.Split(string(logText), "\n") {
		if strings.Contains(line, "level=ERROR") && len(errs) < 10 {
			errs = append(errs, line)
		}
	}
	assert.Empty(t, errs, "the server logged errors")
}

// startHostile builds the binary, starts the stand-in forges and `alfred serve` against a fresh
// schema, and waits for /readyz.
func startHostile(t *testing.T) *hostileEnv { return startHostileWith(t, hostileBodyTO) }

// startHostileWith is startHostile with http.read_timeout set to readTimeout.
func startHostileWith(t *testing.T, readTimeout time.Duration) *hostileEnv {
	_, dsn := pgtest.New(t)
	_ = runtimetest.Client(t) // serve needs the Docker engine
	dir := t.TempDir()
	bin := servetest.Binary(t)

	fj := forgetest.NewForgejoServer(t)
	gl := forgetest.NewGitLabServer(t)
	for _, s := range []forgetest.Seeder{fj, gl} {
		s.AddRepo("acceptance/sandbox", "main", "https://example.invalid/sandbox.git")
		s.AddUser("alice")
		s.SetAccess("acceptance/sandbox", "alice", true)
		s.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: "Export the report as CSV", Body: "Please.",
			Author: "alice"})
	}
	addr, adminAddr := freeAddr(t), freeAddr(t)
	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte("development:\n  summary: nothing\n"), 0o644))
	cfgPath := filepath.Join(dir, "alfred.yaml")
	// The bot is an account no recorded delivery names, so nothing starts a container: the
	// suite is about the edge and the inbox.
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
listen: %s
data_dir: %s
max_body_bytes: %d
admin: {listen: %s, token: %s}
http:
  read_timeout: %s
  idle_timeout: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token: %s, webhook_secret: %s, bot_user: hostile-bot}
  - {name: gitlab, kind: gitlab, base_url: %s, token: %s, webhook_secret: %s, bot_user: hostile-bot}
agents:
  - {name: script, adapter: script, image: alfred/hostile-unused:none, script: %s}
phases: {default: script}
workers: {count: 2, lease_ttl: 5s, poll_interval: 100ms}
`, addr, filepath.Join(dir, "data"), hostileMaxBody, adminAddr, hostileAdminToken, readTimeout, hostileIdle,
		fj.URL, fj.Token, hostileSecret, gl.URL, gl.Token, hostileToken, script)), 0o600))

	db := sqlx.MustConnect("postgres", dsn)
	t.Cleanup(func() { _ = db.Close() })
	e := &hostileEnv{t: t, url: "http://" + addr, addr: addr, admin: "http://" + adminAddr, db: db,
		log: filepath.Join(dir, "serve.log"), bin: bin, cfg: cfgPath, dsn: dsn}
	e.start()
	return e
}

// start starts `alfred serve` on the suite's configuration and database, its output appended
// to the log, and waits for /readyz. It is killed when the test ends.
func (e *hostileEnv) start() {
	e.proc = servetest.Start(e.t, servetest.Readyz, "serve", e.bin, e.cfg, e.log, e.addr, "ALFRED_DATABASE_URL="+e.dsn)
}

// kill ends the running `alfred serve` with SIGKILL, as a crash would, and reaps it.
func (e *hostileEnv) kill() {
	if e.proc != nil {
		e.proc.Kill()
	}
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// requireAdminPrivate checks that the status page is on the admin listener only, behind the
// token.
func (e *hostileEnv) requireAdminPrivate() {
	get := func(url, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(e.t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(e.t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Concurrent first deliveries race to create a mailbox, and the losers' inserts use up
	// sequence values: ask for a mailbox that exists, not for id 1.
	var id int64
	require.NoError(e.t, e.db.Get(&id, `SELECT min(id) FROM mailboxes`))
	session := fmt.Sprintf("/mailboxes/%d/session", id)
	code, body := get(e.admin+session, "")
	assert.Equal(e.t, http.StatusUnauthorized, code, "the status page refuses a request without the token")
	assert.NotContains(e.t, body, "state")
	code, _ = get(e.admin+session, "wrong-token")
	assert.Equal(e.t, http.StatusUnauthorized, code)
	code, body = get(e.admin+session, hostileAdminToken)
	assert.Equal(e.t, http.StatusOK, code, body)
	assert.Contains(e.t, body, `"state"`)
	code, _ = get(e.url+session, hostileAdminToken)
	assert.Equal(e.t, http.StatusNotFound, code, "the webhook port serves no state, token or not")
}

// sendAll sends the cases with n concurrent senders and returns the answers in case order.
func (e *hostileEnv) sendAll(cases []hostileCase, n int) []hostileAnswer {
	out := make([]hostileAnswer, len(cases))
	client := &http.Client{Timeout: 60 * time.Second}
	var wg sync.WaitGroup
	next := make(chan int)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = e.send(client, cases[i])
			}
		}()
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func (e *hostileEnv) send(client *http.Client, c hostileCase) hostileAnswer {
	path := c.path
	if path == "" {
		path = "/webhooks/" + c.forge
	}
	method := cmpOrString(c.method, http.MethodPost)
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(c.body))
	require.NoError(e.t, err)
	for k, vs := range c.header {
		switch k {
		case "Content-Length", "Host", "Accept-Encoding":
			continue
		}
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		return hostileAnswer{c: c, status: -1, body: err.Error()}
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var doc struct {
		Delivery string `json:"delivery"`
	}
	_ = json.Unmarshal(b, &doc)
	return hostileAnswer{c: c, status: resp.StatusCode, delivery: doc.Delivery, body: string(bytes.TrimSpace(b))}
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// burst sends n distinct valid comment deliveries at once, each on its own connection.
func (e *hostileEnv) burst(n int) []hostileAnswer {
	cases := e.burstCases(n)
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 0,
		MaxIdleConnsPerHost: n, DisableKeepAlives: true}}
	out := make([]hostileAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = e.send(client, cases[i])
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// burstCases returns n distinct valid comment deliveries (class "burst"), each with its own
// delivery id and comment.
func (e *hostileEnv) burstCases(n int) []hostileCase {
	tmpl := hostileTemplate(e.t, "forgejo-live/006-issue_comment-created.json")
	cases := make([]hostileCase, n)
	for i := range cases {
		body := jsonEdit(e.t, tmpl, func(d map[string]any) {
			at(d, "comment")["body"] = fmt.Sprintf("burst comment %d", i)
			at(d, "comment")["id"] = 900000 + i
		})
		cases[i] = fjCase("burst", fmt.Sprint(i), "issue_comment", body, 202)
	}
	return cases
}

// slowResult is how the server treated one slow client.
type slowResult struct {
	name   string
	cut    bool
	detail string
}

// slowClients opens connections that send their headers or body at one byte a second and
// reports whether the server ended each within the configured read timeout (with a margin
// for a loaded machine; the bound only decides when the test gives up waiting).
func (e *hostileEnv) slowClients() []slowResult {
	body := hostileTemplate(e.t, "forgejo-live/006-issue_comment-created.json")
	head := fmt.Sprintf("POST /webhooks/forgejo HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"X-Forgejo-Event: issue_comment\r\nX-Forgejo-Event-Type: issue_comment\r\nX-Forgejo-Delivery: slow\r\n"+
		"X-Forgejo-Signature: %s\r\nContent-Length: %d\r\n\r\n", e.addr, forgejo.Sign(hostileSecret, body), len(body))
	type slow struct {
		name   string
		prefix string // sent at once
		drip   string // then one byte a second
	}
	cases := []slow{
		{"body-1-byte-per-second", head, string(body)},
		{"headers-1-byte-per-second", "", head},
		{"body-never-sent", head, strings.Repeat(" ", 1000)},
	}
	give := hostileBodyTO + 15*time.Second // ReadHeaderTimeout is 10 s
	out := make([]slowResult, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = slowResult{name: c.name}
			conn, err := net.Dial("tcp", e.addr)
			if err != nil {
				out[i].detail = err.Error()
				return
			}
			defer conn.Close()
			closed := make(chan string, 1)
			go func() {
				b, _ := io.ReadAll(conn)
				closed <- string(b)
			}()
			if _, err := io.WriteString(conn, c.prefix); err != nil {
				out[i].cut, out[i].detail = true, err.Error()
				return
			}
			deadline := time.After(give)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for j := 0; ; j++ {
				select {
				case got := <-closed:
					out[i].cut, out[i].detail = true, firstLine(got)
					return
				case <-deadline:
					out[i].detail = fmt.Sprintf("still open after %s, %d bytes dripped", give, j)
					return
				case <-tick.C:
					if j < len(c.drip) {
						if _, err := conn.Write([]byte{c.drip[j]}); err != nil {
							out[i].cut, out[i].detail = true, err.Error()
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

type idleResult struct{ opened, closed int }

// idleConnections opens n keep-alive connections, makes one request on each and counts how
// many the server has closed once the idle timeout has passed (with a margin).
func (e *hostileEnv) idleConnections(n int) idleResult {
	var res idleResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	give := hostileIdle + 15*time.Second
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", e.addr)
			if err != nil {
				return
			}
			defer conn.Close()
			if _, err := fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", e.addr); err != nil {
				return
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			res.opened++
			mu.Unlock()
			_ = conn.SetReadDeadline(time.Now().Add(give))
			if _, err := br.ReadByte(); err == io.EOF {
				mu.Lock()
				res.closed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

// requireApplied checks that every 202 answer's event is stored, and waits until every stored
// event is processed (its processed_at set by a worker, with an outcome).
func (e *hostileEnv) requireApplied(answers []hostileAnswer) {
	t := e.t
	for _, a := range answers {
		if a.status != http.StatusAccepted {
			continue
		}
		var n int
		require.NoError(t, e.db.Get(&n, `SELECT count(*) FROM events WHERE forge = $1 AND delivery_id = $2`,
			a.c.forge, a.delivery))
		assert.Equal(t, 1, n, "%s/%s answered 202 but its event %q is not stored", a.c.class, a.c.name, a.delivery)
	}
	// The stored row is bounded by its delivery: at most twice the body plus the event's
	// fixed fields (spec/edge.md, "What is stored").
	for _, a := range answers {
		if a.status != http.StatusAccepted {
			continue
		}
		var size int
		require.NoError(t, e.db.Get(&size, `SELECT octet_length(payload) FROM events WHERE forge = $1 AND delivery_id = $2`,
			a.c.forge, a.delivery))
		assert.LessOrEqual(t, size, 2*len(a.c.body)+4096, "%s/%s: a %d-byte body became a %d-byte row",
			a.c.class, a.c.name, len(a.c.body), size)
	}
	var pending []string
	assert.Eventually(t, func() bool {
		pending = nil
		require.NoError(t, e.db.Select(&pending, `SELECT forge || ' ' || delivery_id FROM events
			WHERE processed_at IS NULL ORDER BY id LIMIT 20`))
		return len(pending) == 0
	}, time.Minute, 200*time.Millisecond, "events stored but never processed: %v", &pending)
}

// hostileFixtureRoot is the directory holding the recorded deliveries (webhook/…/testdata).
const hostileFixtureRoot = "../../webhook"

// hostileTemplate reads a recorded delivery's body by its path below a testdata directory
// ("forgejo-live/006-….json" or "gitlab/note_hook_issue.json").
func hostileTemplate(t *testing.T, rel string) []byte {
	t.Helper()
	var found string
	_ = filepath.WalkDir(hostileFixtureRoot, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(filepath.ToSlash(p), "/"+rel) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if found == "" { // the fixtures moved with their forge package
		base := filepath.Base(rel)
		_ = filepath.WalkDir(hostileFixtureRoot, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && filepath.Base(p) == base && strings.Contains(p, "testdata") {
				found = p
				return fs.SkipAll
			}
			return nil
		})
	}
	require.NotEmpty(t, found, "recorded delivery %s not found", rel)
	b, err := os.ReadFile(found)
	require.NoError(t, err)
	return b
}

// jsonEdit decodes body, applies edit and encodes it again.
func jsonEdit(t *testing.T, body []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(body, &d))
	edit(d)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // as the forges write: "<" and "&" unescaped
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(d))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// at returns the object at key, creating it when missing.
func at(d map[string]any, key string) map[string]any {
	m, ok := d[key].(map[string]any)
	if !ok {
		m = map[string]any{}
		d[key] = m
	}
	return m
}

var hostileSeq int

// fjCase is a Forgejo delivery of eventType with body, signed with the suite's secret and
// given a fresh delivery id.
func fjCase(class, name, eventType string, body []byte, want ...int) hostileCase {
	hostileSeq++
	r := forgetest.NewForgejoRequest("http://x/", eventType, fmt.Sprintf("hostile-%s-%d", class, hostileSeq), hostileSecret, body)
	return hostileCase{class: class, name: name, forge: "forgejo", header: r.Header, body: body, want: want}
}

// glCase is a GitLab delivery with the event header, the suite's token and a fresh
// Idempotency-Key.
func glCase(class, name, event string, body []byte, want ...int) hostileCase {
	hostileSeq++
	r := forgetest.NewGitLabRequest("http://x/", event, fmt.Sprintf("hostile-%s-%d", class, hostileSeq), hostileToken, body)
	return hostileCase{class: class, name: name, forge: "gitlab", header: r.Header, body: body, want: want}
}
