package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/alfred-bot/alfred/internal/base/httpserve"
	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/webhook"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// pgbenchPath is the PostgreSQL client's benchmark tool (Debian: postgresql-client).
const pgbenchPath = "/usr/bin/pgbench"

// BenchmarkIngestVsPgbench measures the webhook edge as `alfred serve` runs it (the receiver
// behind httpserve's limits, the pool sized by the configuration defaults, the real store) at
// 1, 8 and 32 concurrent senders, and next to it pgbench inserting the same rows (the stored
// form of the same deliveries, into a copy of the events table with its unique constraints and
// index) with the same number of clients, in the same run: three rounds of ingest then pgbench
// for as long (at least 1 s). It reports the median deliveries/s, the p50/p99 acknowledgement
// in ms over all rounds, pgbench's median TPS and the median ratio ingest/pgbench. Each
// delivery is a distinct signed Forgejo comment, spread over 50 issues; b.N deliveries per
// client count.
//
//	go test -run '^$' -bench IngestVsPgbench -benchtime 3000x ./webhook/
func BenchmarkIngestVsPgbench(b *testing.B) {
	if _, err := os.Stat(pgbenchPath); err != nil {
		b.Skipf("SKIPPING: %s not installed (postgresql-client)", pgbenchPath)
	}
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchIngestVsPgbench(b, clients) })
	}
}

func benchIngestVsPgbench(b *testing.B, clients int) {
	db, _ := pgtest.New(b)
	defaults := config.Default()
	db.SetMaxOpenConns(defaults.Database.MaxOpenConns)
	db.SetMaxIdleConns(defaults.Database.MaxIdleConns)
	db.SetConnMaxLifetime(defaults.Database.ConnMaxLifetime)
	db.SetConnMaxIdleTime(defaults.Database.ConnMaxIdleTime)
	store := postgres.New(db, nil)
	src, err := forgejo.NewSource(forgejo.SourceConfig{Secrets: []string{"bench-secret"}})
	if err != nil {
		b.Fatal(err)
	}
	rc, err := webhook.NewReceiver(webhook.ReceiverConfig{Sources: map[string]webhook.Source{"forgejo": src},
		Inbox: store, Ready: store.Ping, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv := limitedServer(defaults, rc)
	defer srv.Close()
	tmpl, err := os.ReadFile(fixturePath(b, "forgejo-live/006-issue_comment-created.json"))
	if err != nil {
		b.Fatal(err)
	}
	// The deliveries are built and signed before each round and sent by a lean load generator
	// (wire.go), so that a round measures the receiver rather than the senders.
	wire := func(n int64) []byte {
		body := bytes.Replace(tmpl, []byte(`"body": "Date, amount, category."`),
			fmt.Appendf(nil, `"body": "delivery %d"`, n), 1)
		body = bytes.Replace(body, []byte(`"number": 1,`), fmt.Appendf(nil, `"number": %d,`, 1+n%50), 1)
		return wireRequest(b, forgetest.NewForgejoRequest(srv.URL+"/webhooks/forgejo", "issue_comment",
			fmt.Sprintf("bench-%d", n), "bench-secret", body))
	}
	addr := srv.Listener.Addr().String()
	var seq atomic.Int64
	if _, err := sendRound(addr, 1, [][]byte{wire(0)}); err != nil { // the row pgbench copies
		b.Fatal(err)
	}
	table, err := pgbenchSetup(db)
	if err != nil {
		b.Fatal(err)
	}

	// Rounds of ingest then pgbench, so that both see the same machine: the figures are the
	// medians over the rounds.
	const rounds = 3
	var lat []time.Duration
	var rates, tpss, ratios []float64
	var ingestCPU, pgbenchCPU cpuPer
	b.ResetTimer()
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - (rounds-1)*(b.N/rounds)
		}
		if n == 0 {
			continue // b.N below the rounds: the framework's first probe
		}
		b.StopTimer()
		reqs := make([][]byte, n)
		for i := range reqs {
			reqs[i] = wire(seq.Add(1))
		}
		b.StartTimer()
		cpu0 := readCPU()
		start := time.Now()
		got, err := sendRound(addr, clients, reqs)
		elapsed := time.Since(start)
		cpu1 := readCPU()
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, got...)
		b.StopTimer()
		tps, inserts, err := pgbenchInserts(b, table, clients, max(elapsed, time.Second))
		if err != nil {
			b.Fatal(err)
		}
		cpu2 := readCPU()
		b.StartTimer()
		ingestCPU.add(cpu1.sub(cpu0), len(got))
		pgbenchCPU.add(cpu2.sub(cpu1), inserts)
		rate := float64(len(got)) / elapsed.Seconds()
		rates, tpss, ratios = append(rates, rate), append(tpss, tps), append(ratios, rate/tps)
	}
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(median(rates), "deliveries/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(median(tpss), "pgbench-tps")
	b.ReportMetric(median(ratios), "ratio")
	ingestCPU.report(b, "delivery")
	pgbenchCPU.report(b, "pgbench-insert")
	if st := store.InsertStats(); st.Statements > 0 {
		b.ReportMetric(float64(st.Deliveries)/float64(st.Statements), "deliveries/insert")
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// pgbenchSetup creates pgbench_events, a copy of the events table (columns, defaults, unique
// constraints and indexes), and returns the name of a pgbench script inserting one row shaped
// like the first stored delivery (its payload, a fresh delivery id and body hash).
func pgbenchSetup(db *sqlx.DB) (script string, err error) {
	ctx := context.Background()
	var schema, payload string
	if err := db.GetContext(ctx, &schema, `SELECT current_schema()`); err != nil {
		return "", err
	}
	if err := db.GetContext(ctx, &payload, `SELECT payload FROM events ORDER BY id LIMIT 1`); err != nil {
		return "", err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE pgbench_events (LIKE events INCLUDING ALL)`); err != nil {
		return "", err
	}
	sql := fmt.Sprintf(`INSERT INTO %s.pgbench_events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at) `+
		`VALUES (1 + :client_id %% 50, 'forgejo', gen_random_uuid()::text, md5(random()::text || clock_timestamp()::text), 'comment', $payload$%s$payload$, now()) ON CONFLICT DO NOTHING;`+"\n",
		schema, payload)
	f, err := os.CreateTemp("", "alfred-pgbench-*.sql")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString(sql); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// pgbenchInserts runs the pgbench script with clients clients for d (whole seconds, rounded
// up) and returns its TPS without the initial connection time and the number of inserts.
func pgbenchInserts(b *testing.B, script string, clients int, d time.Duration) (tps float64, inserts int, err error) {
	b.Cleanup(func() { _ = os.Remove(script) })
	u, err := url.Parse(os.Getenv("ALFRED_TEST_DATABASE_URL"))
	if err != nil {
		return 0, 0, err
	}
	q := u.Query()
	q.Del("search_path") // lib/pq keys libpq does not know
	q.Del("binary_parameters")
	u.RawQuery = q.Encode()
	secs := int((d + time.Second - 1) / time.Second)
	cmd := exec.Command(pgbenchPath, "-n", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 4)),
		"-T", strconv.Itoa(secs), "-f", script, u.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("pgbench: %w: %s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	c := regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`).FindSubmatch(out)
	if m == nil || c == nil {
		return 0, 0, fmt.Errorf("pgbench: no tps in %s", out)
	}
	if tps, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
		return 0, 0, err
	}
	inserts, err = strconv.Atoi(string(c[1]))
	return tps, inserts, err
}

// cpuReading is the CPU used so far by this process (with its ended children: pgbench) and by
// PostgreSQL; ok is false where /proc cannot be read.
type cpuReading struct {
	self, postgres time.Duration
	ok             bool
}

func readCPU() cpuReading {
	self, pg, ok := processCPU()
	return cpuReading{self: self, postgres: pg, ok: ok}
}

func (c cpuReading) sub(o cpuReading) cpuReading {
	return cpuReading{self: c.self - o.self, postgres: c.postgres - o.postgres, ok: c.ok && o.ok}
}

// cpuPer sums CPU readings over rounds and the units of work they did.
type cpuPer struct {
	cpu   cpuReading
	units int
	bad   bool
}

func (c *cpuPer) add(r cpuReading, units int) {
	c.bad = c.bad || !r.ok
	c.cpu.self += r.self
	c.cpu.postgres += r.postgres
	c.units += units
}

// report adds the CPU per unit, in µs, of the client and server side (for ingest: the
// receiver and its senders; for pgbench: pgbench) and of PostgreSQL.
func (c *cpuPer) report(b *testing.B, unit string) {
	if c.bad || c.units == 0 {
		return
	}
	b.ReportMetric(float64(c.cpu.self.Microseconds())/float64(c.units), "go-µs/"+unit)
	b.ReportMetric(float64(c.cpu.postgres.Microseconds())/float64(c.units), "pg-µs/"+unit)
}

// limitedServer starts h behind httpserve with the HTTP limits of cfg, as alfred serve runs the
// receiver (cmd/alfred's httpLimits), so a benchmark measures the stages a delivery passes.
func limitedServer(cfg *config.Config, h http.Handler) *httptest.Server {
	l := cfg.HTTP
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = httpserve.New(httpserve.Limits{ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes,
		MaxConcurrent: l.MaxConcurrent, MaxReaders: l.MaxReaders, MaxBodyBytes: cfg.MaxBodyBytes,
		BodyMemory: l.MaxBodyMemory}, h).Server
	srv.Start()
	return srv
}
