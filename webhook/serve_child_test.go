package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/migrations"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// The stores BenchmarkIngestVsPgbench runs `alfred serve` on.
const (
	benchSQLite   = "sqlite"
	benchPostgres = "postgres"
)

// TestMain runs the package's tests and benchmarks, then removes the alfred binary the
// benchmarks that run it built once (servetest.Binary). With floorServeEnv set it is
// BenchmarkIngestFloor's receiver instead, and runs nothing else.
func TestMain(m *testing.M) {
	if os.Getenv(floorServeEnv) != "" {
		fmt.Fprintln(os.Stderr, "floor receiver:", serveFloor(os.Getenv(floorPayloadEnv), os.Getenv(floorDatabaseEnv)))
		os.Exit(1)
	}
	code := m.Run()
	servetest.RemoveBinary()
	os.Exit(code)
}

// serveChild is an `alfred serve` child process of a benchmark: its webhook listener, its
// admin listener and token, and its store (a PostgreSQL schema, or a SQLite file in its data
// directory).
type serveChild struct {
	proc             *servetest.Process
	addr, admin      string
	adminToken       string
	databaseURL, dir string
}

// startServeChild starts the binary on store (benchPostgres with databaseURL, a migrated
// schema; benchSQLite in a data directory of its own) with a Forgejo stand-in and the
// configuration's defaults for the HTTP limits and the database pool, webhook secret secret,
// and waits until it answers /readyz (servetest.Start). The bot is an account no delivery
// names, so nothing starts a container; the workers fold every stored event as they would in
// production. The process is killed when b ends; its log is printed if b failed.
func startServeChild(b *testing.B, store, databaseURL, secret string) *serveChild {
	b.Helper()
	dir := b.TempDir()
	fj := forgetest.NewForgejoServer(b)
	fj.AddRepo("acceptance/sandbox", "main", "https://example.invalid/sandbox.git")
	c := &serveChild{addr: loopbackAddr(b), admin: "http://" + loopbackAddr(b), adminToken: "bench-admin-token",
		dir: dir}
	if store == benchPostgres {
		c.databaseURL = databaseURL
	}
	script := filepath.Join(dir, "script.yaml")
	cfg := filepath.Join(dir, "alfred.yaml")
	if err := os.WriteFile(script, []byte("development:\n  summary: nothing\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
listen: %s
data_dir: %s
admin: {listen: %s, token: %s}
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token: %s, webhook_secret: %s, bot_user: bench-bot}
agents:
  - {name: script, adapter: script, image: alfred/bench-unused:none, script: %s}
phases: {default: script}
`, c.addr, filepath.Join(dir, "data"), c.admin[len("http://"):], c.adminToken, fj.URL, fj.Token, secret, script), 0o600); err != nil {
		b.Fatal(err)
	}
	// Ready is the child's own answer on /readyz.
	c.proc = servetest.Start(b, servetest.Readyz, "alfred serve", servetest.Binary(b), cfg, filepath.Join(dir, "serve.log"),
		c.addr, "ALFRED_DATABASE_URL="+c.databaseURL)
	return c
}

// db opens the child's store for the benchmark to read (a SQLite file without the process
// lock: readers do not block the writer in WAL mode).
func (c *serveChild) db(b *testing.B) *sqlx.DB {
	b.Helper()
	d, path := store.Engine(c.databaseURL, filepath.Join(c.dir, "data"))
	dsn := c.databaseURL
	if d == migrations.SQLite {
		dsn = sqlite.DSN(path)
	}
	db, err := sqlx.Connect(string(d), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// commentDelivery returns the recorded Forgejo comment tmpl made delivery n of a benchmark: its
// text "delivery n", on issue 1+n%issues.
func commentDelivery(tmpl []byte, n int64, issues int) []byte {
	body := bytes.Replace(tmpl, []byte(`"body": "Date, amount, category."`), fmt.Appendf(nil, `"body": "delivery %d"`, n), 1)
	return bytes.Replace(body, []byte(`"number": 1,`), fmt.Appendf(nil, `"number": %d,`, 1+n%int64(issues)), 1)
}

// storedPayload sends the child one delivery (a wired request) and returns the payload its
// store, db, kept for it: the stored form the pgbench rows copy.
func (c *serveChild) storedPayload(b *testing.B, db eventsDB, delivery []byte) string {
	b.Helper()
	if _, err := sendRound(c.addr, 1, [][]byte{delivery}); err != nil {
		b.Fatal(err)
	}
	var payload string
	if err := db.GetContext(b.Context(), &payload, `SELECT payload FROM events ORDER BY id LIMIT 1`); err != nil {
		b.Fatal(err)
	}
	return payload
}

// eventsDB is a store's database as the benchmarks read it (*sqlx.DB, sqlstore.DB).
type eventsDB interface {
	GetContext(ctx context.Context, dest any, query string, args ...any) error
}

// unprocessed counts the events of db not processed yet.
func unprocessed(b *testing.B, db eventsDB) int {
	b.Helper()
	var n int
	if err := db.GetContext(b.Context(), &n, `SELECT count(*) FROM events WHERE processed_at IS NULL`); err != nil {
		b.Fatal(err)
	}
	return n
}

// waitProcessed waits until the workers storing into db have processed every event (polling
// every every) and returns how many were left unprocessed when it was called and how long they
// took. It fails b after 5 minutes.
func waitProcessed(b *testing.B, db eventsDB, every time.Duration) (backlog int, took time.Duration) {
	b.Helper()
	start := time.Now()
	backlog = unprocessed(b, db)
	t := time.NewTicker(every)
	defer t.Stop()
	deadline := time.After(5 * time.Minute)
	for n := backlog; n > 0; n = unprocessed(b, db) {
		select {
		case <-t.C:
		case <-deadline:
			b.Fatalf("%d events still unprocessed after 5 minutes", n)
		}
	}
	return backlog, time.Since(start)
}

// insertCounts scrapes the child's /metrics for the grouped insertion of events: the insert
// statements run and the deliveries they carried.
func (c *serveChild) insertCounts(b *testing.B) (statements, deliveries float64) {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, c.admin+"/metrics", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	read := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` ([0-9.e+]+)$`).FindSubmatch(body)
		if m == nil {
			return 0
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	return read("alfred_event_insert_statements_total"), read("alfred_event_insert_deliveries_total")
}

// loopbackAddr returns a free loopback address (a port the kernel gave and took back).
func loopbackAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// rssSampler reads a process's resident set every interval until stopped: all of it (VmRSS)
// and its anonymous memory (RssAnon: the heap and stacks, without the binary's mapped code).
type rssSampler struct {
	stop        chan struct{}
	done        chan struct{}
	total, anon []float64
}

// sampleRSS starts sampling the resident set of pid.
func sampleRSS(pid int, interval time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			total, ok1 := procStatusMiB(pid, "VmRSS")
			anon, ok2 := procStatusMiB(pid, "RssAnon")
			if ok1 && ok2 {
				s.total, s.anon = append(s.total, total), append(s.anon, anon)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// end stops the sampler and returns its samples of VmRSS and of RssAnon.
func (s *rssSampler) end() (total, anon []float64) {
	close(s.stop)
	<-s.done
	return s.total, s.anon
}
