package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// This file holds the kill -9 matrix of spec/reliability.md, "Exactly once across restarts and
// replicas": `alfred serve` (the real binary, the stand-in claude CLI in real containers, one
// PostgreSQL schema, the Forgejo stand-in) is killed with SIGKILL at each moment of the
// development run, with deliveries arriving meanwhile, and started again. Every moment is
// reached from outside the process, from signals, never from a sleep:
//
//   - before the create: the forge is reached through holdProxy, which holds the status-comment
//     write the machine makes after it recorded the run and before it hands the job to the
//     runner (the run row is running, no container record, no container);
//   - created, not started: the Docker Engine is reached through holdProxy on a socket of the
//     test's, which holds the start request of the development container (the container
//     exists, created, never started);
//   - running: the stand-in's hold file keeps the container running;
//   - finished, not collected: the same, the hold file removed while Alfred is down and the
//     container's exit waited for;
//   - collected, not applied: the forge proxy holds the request opening the merge request (the
//     run row is succeeded and not applied).

// onceMoment is a moment of a development run at which the matrix kills Alfred.
type onceMoment string

const (
	momentBeforeCreate onceMoment = "before-create"
	momentCreated      onceMoment = "created-not-started"
	momentRunning      onceMoment = "running"
	momentFinished     onceMoment = "finished-not-collected"
	momentCollected    onceMoment = "collected-not-applied"
)

// onceMoments are the matrix's moments, in the order of a run.
var onceMoments = []onceMoment{momentBeforeCreate, momentCreated, momentRunning, momentFinished, momentCollected}

// holdProxy is a reverse proxy between `alfred serve` and a server it calls (the forge, the
// Docker Engine). Armed with a predicate, it holds the first request the predicate accepts:
// the request is not forwarded, the proxy says which on Held, and it answers nothing until the
// caller's connection closes (the process was killed). It then forwards everything again.
type holdProxy struct {
	rp *httputil.ReverseProxy
	mu sync.Mutex
	// hold is the armed predicate, nil when disarmed; it is called under mu.
	hold func(*http.Request) bool
	// after, when set, sees every forwarded request with its answer's status.
	after func(*http.Request, int)
	// Held receives the method and path of the held request.
	Held chan string
	// stop ends a hold still going when the test ends (release).
	stop     chan struct{}
	stopOnce sync.Once
}

// release ends any hold; registered as a cleanup after the proxy's server, so that it runs
// before the server's Close waits for the held request.
func (p *holdProxy) release() { p.stopOnce.Do(func() { close(p.stop) }) }

func newHoldProxy(rp *httputil.ReverseProxy) *holdProxy {
	p := &holdProxy{rp: rp, Held: make(chan string, 1), stop: make(chan struct{})}
	rp.FlushInterval = -1 // streamed answers (logs, waits) go through as they come
	return p
}

// arm makes the proxy hold the next request hold accepts.
func (p *holdProxy) arm(hold func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = hold
}

func (p *holdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	held := p.hold != nil && p.hold(r)
	if held {
		p.hold = nil
	}
	p.mu.Unlock()
	if held {
		p.Held <- r.Method + " " + r.URL.Path
		// The server notices a closed connection only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-p.stop:
		}
		return
	}
	if p.after == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	p.rp.ServeHTTP(sw, r)
	p.after(r, sw.status)
}

// statusWriter records the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (a hijacked attach).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// waitHeld returns the held request, failing the test when none was held within a minute
// (the moment was never reached).
func (p *holdProxy) waitHeld(t *testing.T, what string) string {
	t.Helper()
	select {
	case r := <-p.Held:
		t.Logf("held %s: %s", what, r)
		return r
	case <-time.After(2 * time.Minute):
		t.Fatalf("the proxy never held %s", what)
		return ""
	}
}

// newForgeProxy serves a holdProxy in front of the forge stand-in at target.
func newForgeProxy(t *testing.T, target string) (*holdProxy, string) {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := newHoldProxy(httputil.NewSingleHostReverseProxy(u))
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	t.Cleanup(p.release)
	return p, srv.URL
}

// dockerStartPath is the Engine API's start of a container, with its id.
var dockerStartPath = regexp.MustCompile(`/containers/([^/]+)/start$`)

// dockerProxy is a holdProxy in front of the Docker Engine on a socket of the test's; it
// counts the containers it started per phase label.
type dockerProxy struct {
	*holdProxy
	cli  *client.Client
	sock string
	mu   sync.Mutex
	// started counts the successful starts per phase label.
	started map[string]int
}

// newDockerProxy serves a dockerProxy on a new socket in a short temporary directory (a unix
// socket's path is limited to about 100 bytes), forwarding to the engine runtimetest.Client
// reaches.
func newDockerProxy(t *testing.T) *dockerProxy {
	cli := runtimetest.Client(t)
	host := cli.DaemonHost()
	sockPath, ok := strings.CutPrefix(host, "unix://")
	require.True(t, ok, "the Docker Engine is reached on a unix socket, not %s", host)
	dir, err := os.MkdirTemp("", "once")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d := &dockerProxy{cli: cli, sock: filepath.Join(dir, "docker.sock"), started: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "docker"
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sockPath)
		}},
	}
	d.holdProxy = newHoldProxy(rp)
	d.after = func(r *http.Request, status int) {
		if m := dockerStartPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost && status < 300 {
			phase := d.phaseOf(m[1])
			d.mu.Lock()
			d.started[phase]++
			d.mu.Unlock()
		}
	}
	ln, err := net.Listen("unix", d.sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: d.holdProxy}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	t.Cleanup(d.release)
	return d
}

// phaseOf is the phase label of container id, "" when it has none or is gone.
func (d *dockerProxy) phaseOf(id string) string {
	info, err := d.cli.ContainerInspect(context.Background(), id)
	if err != nil || info.Config == nil {
		return ""
	}
	return info.Config.Labels[runner.LabelPhase]
}

// startedOf is how many containers of phase the proxy started.
func (d *dockerProxy) startedOf(phase string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started[phase]
}

// onceEnv is one cell of the matrix: one `alfred serve` on its own PostgreSQL schema, data
// directory, forge stand-in (behind a holdProxy) and runtime (rt: the Docker Engine or a
// namespace of the test cluster, behind a holdProxy).
type onceEnv struct {
	*e2e
	tt                          *testing.T
	dir, bin, cfg, dsn, dataDir string
	fj                          *forgetest.ForgejoServer
	forgeProxy                  *holdProxy
	rt                          onceRuntime
	db                          *sqlx.DB
	proc                        *servetest.Process
	log                         string
	// model is the analyses' model stand-in; analyses counts its final answers per run key.
	model    *apimodetest.Server
	mu       sync.Mutex
	analyses map[string]int
}

// newOnceEnv seeds the forge (issue #1 of acceptance/sandbox by alice, a task, the bot
// assigned) and writes the configuration: the analyses in API mode against a model stand-in
// (the matrix cuts the development run; analysis containers would only add load), the
// stand-in claude in the other phases, ci_wait 2s.
func newOnceEnv(t *testing.T, bin, image string, rt onceRuntime) *onceEnv {
	dir := t.TempDir()
	o := &onceEnv{tt: t, dir: dir, bin: bin, dsn: testDatabaseURL(t, storePostgres), dataDir: filepath.Join(dir, "data"),
		fj: forgetest.NewForgejoServer(t), rt: rt, log: filepath.Join(dir, "serve.log")}
	bare := seedBareRepo(t, dir)
	o.fj.AddRepo("acceptance/sandbox", "main", bare)
	o.fj.AddUser("alice")
	o.fj.AddUser("bot")
	o.fj.SetAccess("acceptance/sandbox", "alice", true)
	o.fj.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: "Export the report as CSV", Body: "Please.",
		Author: "alice", Assignees: []string{"bot"}, Labels: []string{"type::task"}})
	api, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: o.fj.URL, Token: o.fj.Token})
	require.NoError(t, err)
	var forgeURL string
	o.forgeProxy, forgeURL = newForgeProxy(t, o.fj.URL)
	addr := freeAddr(t)
	o.e2e = &e2e{t: t, url: "http://" + addr, forgejo: o.fj, api: api, bare: bare, kind: forge.KindForgejo,
		issue: forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: 1}}
	o.analyses = map[string]int{}
	analyst := apimodetest.Analyst("README.md", handOverFinals)
	o.model = apimodetest.NewAnthropic(t, apiModeKey, apiModeModel, func(ex apimodetest.Exchange) apimodetest.Reply {
		r := analyst(ex)
		if r.Text != "" {
			o.mu.Lock()
			o.analyses[ex.Key()]++
			o.mu.Unlock()
		}
		return r
	})
	keyFile := filepath.Join(dir, "anthropic.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(apiModeKey), 0o600))
	o.cfg = filepath.Join(dir, "alfred.yaml")
	serveConfig{listen: addr, dataDir: o.dataDir, forgeURL: forgeURL, forgeToken: o.fj.Token, image: image,
		ciWait: "2s", leaseTTL: "3s", runner: rt.prepare(t, image, o.dataDir),
		analyst: fmt.Sprintf("{name: analyst, adapter: anthropic-api, model: %s, api_key_file: %s, base_url: %s}",
			apiModeModel, keyFile, o.model.BaseURL())}.write(t, o.cfg)
	return o
}

// start starts `alfred serve` and waits until it answers /healthz (after its start-up
// recovery). It is killed when the test ends.
func (o *onceEnv) start() {
	t := o.tt
	o.proc = servetest.Start(t, servetest.Healthz, "serve", o.bin, o.cfg, o.log, strings.TrimPrefix(o.url, "http://"),
		append([]string{"ALFRED_DATABASE_URL=" + o.dsn}, o.rt.env()...)...)
	if o.db == nil {
		o.db = openTestDatabase(t, o.dsn, o.dataDir)
	}
}

// kill ends the running process with SIGKILL: no cleanup of any kind runs.
func (o *onceEnv) kill() {
	if o.proc != nil {
		o.proc.Kill()
	}
}

// count runs a count query.
func (o *onceEnv) count(q string, args ...any) int {
	var n int
	require.NoError(o.t, o.db.Get(&n, q, args...))
	return n
}

// onceRun is a run row with its key.
type onceRun struct {
	Key     string `db:"key"`
	Status  string `db:"status"`
	Outcome string `db:"outcome"`
	Applied bool   `db:"applied"`
}

// runs lists the issue's runs, oldest first.
func (o *onceEnv) runs() []onceRun {
	var rows []onceRun
	require.NoError(o.t, o.db.Select(&rows, `SELECT phase || CASE WHEN step = '' THEN '' ELSE '.' || step END AS key,
		status, outcome, applied FROM runs ORDER BY id`))
	return rows
}

// turns counts the turns the stand-in CLI answered per run key, from the histories of the
// mailbox's sessions (the CLI appends every prompt it answers to its session's file): the
// agent's own record of what ran ("## Your task (development, attempt 2)" counts as development).
// A run started again after an interruption may start a new
// session; every session's history counts.
func (o *onceEnv) turns(mb int64) map[string]int {
	t := o.t
	var natives []string
	require.NoError(t, o.db.Select(&natives, `SELECT DISTINCT native_id FROM llm_sessions WHERE native_id <> ''`))
	require.NotEmpty(t, natives)
	out := map[string]int{}
	for _, native := range natives {
		history, err := os.ReadFile(filepath.Join(o.dataDir, "sessions", fmt.Sprint(mb), "claude", native+".jsonl"))
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`## Your task \(([a-z_.]+)[,)]`).FindAllStringSubmatch(string(history), -1) {
			out[m[1]]++
		}
	}
	t.Logf("sessions %v, turns %v", natives, out)
	return out
}

// TestKillMatrixDocker is the kill -9 matrix on Docker (PostgreSQL store): for each moment of
// the development run (before the create, created and not started, running, finished and not
// collected, collected and not applied) `alfred serve` is killed with SIGKILL while edits of
// Alfred's status comment arrive (during the run and right after the restart), and started
// again. The issue reaches done; each phase ran once (one succeeded, applied run per phase in
// the store; one answer per analysis from the model stand-in, one development turn in the
// stand-in CLI's session history; one development container started); a run the kill cut before its agent started is recorded interrupted with
// the reason and run again; no comment was posted twice; every event was processed; nothing
// of this Alfred is left (containers, worktrees, container records).
func TestKillMatrixDocker(t *testing.T) {
	killMatrix(t, nil, func(t *testing.T) onceRuntime { return newDockerOnce(t) })
}

// TestKillMatrixKubernetes is TestKillMatrixDocker on the test cluster (runner.runtime
// kubernetes, a namespace of each cell's own): the same moments, the same checks, plus no Pod
// or Secret of the cell left. Created and not started is reached by holding, on the way to the
// API server, the request that makes the new Pod the owner of its Secret: the Pod exists, the
// process never learnt that it runs.
func TestKillMatrixKubernetes(t *testing.T) {
	kubetest.Kubeconfig(t) // skips (fails under CI) without the cluster, before any build
	// The image is imported once for every cell: an import is removed when its test ends.
	killMatrix(t, func(t *testing.T, image string) { kubetest.ImportImage(t, image) },
		func(t *testing.T) onceRuntime { return newKubeOnce(t) })
}

// killMatrix runs every cell of the matrix, in parallel, on the runtime newRT makes per cell;
// setup, when set, makes the stand-in's image available to that runtime.
func killMatrix(t *testing.T, setup func(t *testing.T, image string), newRT func(*testing.T) onceRuntime) {
	cli := runtimetest.Client(t)
	bin := servetest.Binary(t)
	image := agenttest.BuildImageOnce(t, context.Background(), cli)
	if setup != nil {
		setup(t, image)
	}
	for _, m := range onceMoments {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			killAt(t, newOnceEnv(t, bin, image, newRT(t)), m)
			t.Logf("cell %s: %s", m, time.Since(start).Round(time.Second))
		})
	}
}

// killAt drives one cell: assign, plan, validate; reach moment m of the development run;
// events; SIGKILL; restart; on to done; then the checks of TestKillMatrixDocker.
func killAt(t *testing.T, o *onceEnv, m onceMoment) {
	ctx := context.Background()
	o.start()
	require.Equal(t, http.StatusAccepted, o.send("002-issue_assign-assigned", setLabels("type::task")))
	waitStatusWithin(o.e2e, "status::waiting_validation", 3*time.Minute)
	var mb int64
	require.NoError(t, o.db.Get(&mb, `SELECT id FROM mailboxes WHERE number = 1`))
	// The development run's session directory: no CLI ran before it.
	hold := filepath.Join(o.dataDir, "sessions", fmt.Sprint(mb), "claude", agenttest.StandinHoldFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(hold), 0o755))
	devRunning := `SELECT count(*) FROM runs WHERE phase = 'development' AND status = 'running'`

	switch m {
	case momentBeforeCreate:
		// postProgress edits the status comment after the run is recorded, before the job.
		o.forgeProxy.arm(func(r *http.Request) bool {
			return r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/comments") && o.count(devRunning) == 1
		})
	case momentCreated:
		o.rt.armCreated(t)
	case momentRunning, momentFinished:
		require.NoError(t, os.WriteFile(hold, nil, 0o644))
	case momentCollected:
		o.forgeProxy.arm(func(r *http.Request) bool {
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pulls")
		})
	}
	require.NoError(t, o.api.SetLabels(ctx, o.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, o.send("003-issue_label-label_updated", setLabels(o.fj.IssueLabels(o.issue)...)))

	instance := runner.InstanceID(o.dataDir)
	rt := o.rt
	var dev string // the development container, once there is one
	switch m {
	case momentBeforeCreate:
		o.forgeProxy.waitHeld(t, "the status comment's edit")
		require.Equal(t, 1, o.count(devRunning), "the run is recorded")
		require.Zero(t, o.count(`SELECT count(*) FROM executors e JOIN runs r ON r.id = e.run_id WHERE r.phase = 'development'`),
			"no container record yet")
	case momentCreated:
		rt.holder().waitHeld(t, "the development container's start")
		require.Equal(t, 1, o.count(`SELECT count(*) FROM executors e JOIN runs r ON r.id = e.run_id
			WHERE r.phase = 'development' AND e.status = 'starting'`), "the container is recorded, starting")
	case momentRunning, momentFinished:
		require.Eventually(t, func() bool { return len(rt.devRunning(t, instance)) == 1 },
			2*time.Minute, 50*time.Millisecond, "the development container never ran")
		dev = rt.devRunning(t, instance)[0]
	case momentCollected:
		o.forgeProxy.waitHeld(t, "the merge request's creation")
		require.Equal(t, 1, o.count(`SELECT count(*) FROM runs WHERE phase = 'development' AND status = 'succeeded' AND NOT applied`),
			"the run is collected and not applied")
	}
	statusEdits(o.e2e, 3) // the forge's events during the run
	o.kill()

	switch m {
	case momentCreated:
		rt.checkCreated(t, o.createdDev(t))
	case momentRunning:
		running, _ := rt.state(t, dev)
		require.True(t, running, "the container runs while Alfred is down")
	case momentFinished:
		require.NoError(t, os.Remove(hold))
		require.Eventually(t, func() bool {
			running, _ := rt.state(t, dev)
			return !running
		}, time.Minute, 50*time.Millisecond, "the container never finished")
		_, exit := rt.state(t, dev)
		require.Zero(t, exit)
	}

	o.start()
	statusEdits(o.e2e, 2) // received before the restarted process's first pass
	if m == momentRunning {
		// The restarted process reattaches once the killed one's lease expires; the agent
		// answers now.
		require.NoError(t, os.Remove(hold))
	}
	waitStatusWithin(o.e2e, "status::in_review", 3*time.Minute) // in_ci, then no pipeline within ci_wait
	turns := o.turns(mb)                                        // before done removes the session
	mrs := o.fj.MergeRequests("acceptance/sandbox")
	require.Len(t, mrs, 1, "one merge request")
	o.fj.MarkMerged("acceptance/sandbox", mrs[0].Number)
	require.Equal(t, http.StatusAccepted, o.send("022-pull_request-closed", func(doc map[string]any) {
		doc["number"] = mrs[0].Number
		doc["pull_request"].(map[string]any)["number"] = mrs[0].Number
		doc["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = mrs[0].SourceBranch
	}))
	waitStatusWithin(o.e2e, "status::done", 3*time.Minute)
	o.requireUniqueMarkers()

	require.Equal(t, map[string]int{"development": 1}, turns, "the stand-in CLI answered the development once")
	o.mu.Lock()
	require.Equal(t, map[string]int{"analysis.functional": 1, "analysis.technical": 1}, o.analyses,
		"the model answered each analysis once")
	o.mu.Unlock()
	require.Equal(t, 1, rt.startedDev(t, o.dataDir), "one development container started")
	runs := o.runs()
	var dev2 []onceRun
	for _, r := range runs {
		if r.Key == "development" {
			dev2 = append(dev2, r)
		} else {
			require.Equal(t, "succeeded", r.Status, "run %s", r.Key)
			require.True(t, r.Applied, "run %s", r.Key)
		}
	}
	require.Len(t, runs, 2+len(dev2))
	last := dev2[len(dev2)-1]
	require.Equal(t, "succeeded", last.Status)
	require.True(t, last.Applied)
	switch {
	case m == momentBeforeCreate || m == momentCreated && !rt.createdRuns():
		require.Len(t, dev2, 2, "the run cut before its agent started is run again")
		require.Equal(t, "interrupted", dev2[0].Status)
		want := "created but never started"
		if m == momentBeforeCreate {
			want = "no container of the run was running"
		}
		require.Contains(t, dev2[0].Outcome, want)
	case m == momentRunning || m == momentFinished || m == momentCreated:
		require.Len(t, dev2, 1, "the run was reattached or collected, not run again")
		require.Equal(t, "ok (collected after a restart)", last.Outcome)
	default:
		require.Len(t, dev2, 1, "the collected run was applied, not run again")
	}
	require.NotContains(t, string(must(os.ReadFile(o.log))), "a phase runs again for one decision")

	rt.leftovers(t, o.dataDir)
	require.Zero(t, o.count(`SELECT count(*) FROM executors WHERE status IN ('starting', 'ready')`), "a container record is still live")
	require.Eventually(t, func() bool {
		return o.count(`SELECT count(*) FROM events WHERE processed_at IS NULL`) == 0
	}, time.Minute, 50*time.Millisecond, "an event was lost")
}

// createdDev is the name of this Alfred's first development container, from its record.
func (o *onceEnv) createdDev(t *testing.T) string {
	var id string
	require.NoError(t, o.db.Get(&id, `SELECT e.container_name FROM executors e JOIN runs r ON r.id = e.run_id
		WHERE r.phase = 'development' ORDER BY e.id LIMIT 1`))
	require.NotEmpty(t, id)
	return id
}

// must returns v, panicking on err (for reads whose failure the next assertion reports).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
