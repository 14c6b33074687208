package webhook_test

import (
	"context"
	"fmt"
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
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// pgbenchPath is the PostgreSQL client's benchmark tool (Debian: postgresql-client).
const pgbenchPath = "/usr/bin/pgbench"

// minPgbench is the shortest pgbench run of a round: on a loaded machine 32 clients took over
// a second to connect, and a 1-second run then did no transaction at all.
const minPgbench = 3 * time.Second

// BenchmarkIngestVsPgbench measures the webhook edge of the `alfred serve` binary (a child
// process, on the configuration's defaults: HTTP limits, database pool, workers folding what
// is stored) on PostgreSQL and on SQLite, at 1, 8 and 32 concurrent senders, and next to it
// pgbench inserting the same rows into PostgreSQL (the stored form of the same deliveries,
// into a copy of the events table with its unique constraints and index) with the same number
// of clients, in the same run: three rounds of ingest, then the wait until alfred's workers
// have processed what the round stored, then pgbench for as long as the ingest took (at least
// minPgbench). It reports the median deliveries/s, the p50/p99 acknowledgement in ms over all
// rounds, pgbench's median TPS, the median ratio ingest/pgbench, what was left unprocessed
// when a round's last delivery was answered (backlog) and how long it took to process it
// (drain-ms), the deliveries a second stored and processed (processed/s: a round's deliveries
// over its ingest and drain), the CPU per delivery of alfred and of PostgreSQL (the processing of the round's
// events included, to the end of the drain), the deliveries per grouped insert (alfred's /metrics), and
// alfred's resident set (/proc/<pid>/status): at rest before the first round (idle-rss-MiB),
// the median of samples taken every 100 ms while deliveries come (rss-MiB) and its peak
// (peak-rss-MiB, VmHWM); and of it the anonymous memory, the heap and stacks without the
// binary's mapped code (idle-anon-MiB, anon-MiB). Each delivery is a distinct signed Forgejo
// comment, spread over 50 issues; b.N deliveries per client count (run it with -benchtime
// Nx), a fresh process and store for each.
//
//	go test -run '^$' -bench IngestVsPgbench -benchtime 15000x ./webhook/
func BenchmarkIngestVsPgbench(b *testing.B) {
	if _, err := os.Stat(pgbenchPath); err != nil {
		b.Skipf("SKIPPING: %s not installed (postgresql-client)", pgbenchPath)
	}
	for _, store := range []string{benchPostgres, benchSQLite} {
		for _, clients := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("store=%s/clients=%d", store, clients), func(b *testing.B) { benchIngestVsPgbench(b, store, clients) })
		}
	}
}

func benchIngestVsPgbench(b *testing.B, store string, clients int) {
	const rounds = 3
	if b.N < rounds {
		return // the framework's first probe (b.N = 1): nothing to measure in rounds
	}
	// pgbench's schema; alfred's store too on PostgreSQL.
	pgdb, dsn := pgtest.New(b)
	alfred := startServeChild(b, store, dsn, "bench-secret")
	pid := alfred.proc.Cmd.Process.Pid
	tmpl, err := os.ReadFile(fixturePath(b, "forgejo-live/006-issue_comment-created.json"))
	if err != nil {
		b.Fatal(err)
	}
	// The deliveries are built and signed before each round and sent by a lean load generator
	// (wire.go), so that a round measures the receiver rather than the senders.
	wire := func(n int64) []byte {
		return wireRequest(b, forgetest.NewForgejoRequest("http://"+alfred.addr+"/webhooks/forgejo", "issue_comment",
			fmt.Sprintf("bench-%d", n), "bench-secret", commentDelivery(tmpl, n, 50)))
	}
	var seq atomic.Int64
	events := alfred.db(b)
	table, err := pgbenchSetup(pgdb, alfred.storedPayload(b, events, wire(0)))
	if err != nil {
		b.Fatal(err)
	}
	idle, idleOK := procStatusMiB(pid, "VmRSS")
	idleAnon, idleAnonOK := procStatusMiB(pid, "RssAnon")

	// Rounds of ingest then pgbench, so that both see the same machine: the figures are the
	// medians over the rounds.
	var lat []time.Duration
	var rss, rssAnon, backlogs, drains, processed []float64
	var vs vsPgbench
	b.ResetTimer()
	for r := range rounds {
		reqs := roundRequests(b, r, rounds, func() []byte { return wire(seq.Add(1)) })
		cpu0 := readCPU(pid)
		sampler := sampleRSS(pid, 100*time.Millisecond)
		start := time.Now()
		got, err := sendRound(alfred.addr, clients, reqs)
		elapsed := time.Since(start)
		total, anon := sampler.end()
		rss, rssAnon = append(rss, total...), append(rssAnon, anon...)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, got...)
		b.StopTimer()
		// The workers fold what the round stored before pgbench runs, so that pgbench does not
		// share the machine with Alfred's processing, and that processing counts as the
		// deliveries' CPU.
		// Polled every 20 ms: the polls' own cost in the database stays small beside the
		// processing's.
		backlog, drain := waitProcessed(b, events, 20*time.Millisecond)
		backlogs, drains = append(backlogs, float64(backlog)), append(drains, float64(drain.Microseconds())/1000)
		vs.round(b, table, clients, pid, cpu0, readCPU(pid), len(got), elapsed)
		processed = append(processed, float64(len(got))/(elapsed+drain).Seconds())
	}
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	vs.report(b, "alfred-µs/delivery")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(median(backlogs), "backlog")
	b.ReportMetric(median(drains), "drain-ms")
	b.ReportMetric(median(processed), "processed/s")
	if idleOK {
		b.ReportMetric(idle, "idle-rss-MiB")
	}
	if idleAnonOK {
		b.ReportMetric(idleAnon, "idle-anon-MiB")
	}
	if len(rss) > 0 {
		b.ReportMetric(median(rss), "rss-MiB")
		b.ReportMetric(median(rssAnon), "anon-MiB")
	}
	if mib, ok := procStatusMiB(pid, "VmHWM"); ok {
		b.ReportMetric(mib, "peak-rss-MiB")
	}
	if statements, deliveries := alfred.insertCounts(b); statements > 0 {
		b.ReportMetric(deliveries/statements, "deliveries/insert")
	}
}

// vsPgbench gathers, over the rounds of a benchmark, a receiver's ingest next to pgbench's
// inserts in the same round.
type vsPgbench struct {
	rates, tpss, ratios   []float64
	ingestCPU, pgbenchCPU cpuPer
}

// round runs pgbench (script, clients) for as long as the round's ingest took (at least
// minPgbench), with b's timer stopped, and records the round: delivered deliveries answered in
// elapsed, and the CPU of the receiver pid and of PostgreSQL from cpu0 (the round's start) to
// cpu1 (its end, with what the receiver processed after it).
func (v *vsPgbench) round(b *testing.B, script string, clients, pid int, cpu0, cpu1 cpuReading, delivered int, elapsed time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	tps, inserts, err := pgbenchInserts(b, script, clients, max(elapsed, minPgbench))
	if err != nil {
		b.Fatal(err)
	}
	cpu2 := readCPU(pid)
	v.ingestCPU.add(cpu1.sub(cpu0), cpu1.alfred-cpu0.alfred, delivered)
	v.pgbenchCPU.add(cpu2.sub(cpu1), cpu2.self-cpu1.self, inserts)
	rate := float64(delivered) / elapsed.Seconds()
	v.rates, v.tpss, v.ratios = append(v.rates, rate), append(v.tpss, tps), append(v.ratios, rate/tps)
}

// report reports the medians of the rounds (deliveries/s, pgbench-tps, ratio) and the CPU a
// delivery (as receiverMetric, and PostgreSQL's) and a pgbench insert.
func (v *vsPgbench) report(b *testing.B, receiverMetric string) {
	if len(v.rates) == 0 {
		return
	}
	b.ReportMetric(median(v.rates), "deliveries/s")
	b.ReportMetric(median(v.tpss), "pgbench-tps")
	b.ReportMetric(median(v.ratios), "ratio")
	v.ingestCPU.report(b, receiverMetric, "delivery")
	v.pgbenchCPU.report(b, "pgbench-µs/pgbench-insert", "pgbench-insert")
}

// roundRequests builds round r's share of b.N requests (of rounds; the last round takes what
// the division leaves) with wire, the benchmark's timer stopped meanwhile.
func roundRequests(b *testing.B, r, rounds int, wire func() []byte) [][]byte {
	n := b.N / rounds
	if r == rounds-1 {
		n = b.N - (rounds-1)*(b.N/rounds)
	}
	b.StopTimer()
	defer b.StartTimer()
	reqs := make([][]byte, n)
	for i := range reqs {
		reqs[i] = wire()
	}
	return reqs
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// pgbenchSetup creates pgbench_events in db's schema, a copy of the events table (columns,
// defaults, unique constraints and indexes), and returns the name of a pgbench script inserting
// one row shaped like a stored delivery (payload, a fresh delivery id and body hash) as the
// benchmarks' deliveries are stored: comments into mailboxes at rest, recorded processed on
// arrival (mailbox.OutcomeAtRest), so that neither side adds to the pending events' index.
func pgbenchSetup(db *sqlx.DB, payload string) (script string, err error) {
	ctx := context.Background()
	var schema string
	if err := db.GetContext(ctx, &schema, `SELECT current_schema()`); err != nil {
		return "", err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE pgbench_events (LIKE events INCLUDING ALL)`); err != nil {
		return "", err
	}
	sql := fmt.Sprintf(`INSERT INTO %s.pgbench_events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at, outcome) `+
		`VALUES (1 + :client_id %% 50, 'forgejo', gen_random_uuid()::text, md5(random()::text || clock_timestamp()::text), 'comment', $payload$%s$payload$, now(), now(), $outcome$%s$outcome$) ON CONFLICT DO NOTHING;`+"\n",
		schema, payload, mailbox.OutcomeAtRest)
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

// cpuReading is the CPU used so far by this process (with its ended children: pgbench), by
// the alfred process and by PostgreSQL; ok is false where /proc cannot be read.
type cpuReading struct {
	self, alfred, postgres time.Duration
	ok                     bool
}

func readCPU(alfred int) cpuReading {
	self, a, pg, ok := processCPU(alfred)
	return cpuReading{self: self, alfred: a, postgres: pg, ok: ok}
}

func (c cpuReading) sub(o cpuReading) cpuReading {
	return cpuReading{self: c.self - o.self, alfred: c.alfred - o.alfred, postgres: c.postgres - o.postgres, ok: c.ok && o.ok}
}

// cpuPer sums, over rounds, the CPU of the side doing the work (alfred for ingest, pgbench for
// its inserts) and of PostgreSQL, and the units of work they did.
type cpuPer struct {
	worker, postgres time.Duration
	units            int
	bad              bool
}

func (c *cpuPer) add(r cpuReading, worker time.Duration, units int) {
	c.bad = c.bad || !r.ok
	c.worker += worker
	c.postgres += r.postgres
	c.units += units
}

// report adds the CPU per unit, in µs, of the side doing the work (as workerMetric) and of
// PostgreSQL (pg-µs/unit).
func (c *cpuPer) report(b *testing.B, workerMetric, unit string) {
	if c.bad || c.units == 0 {
		return
	}
	b.ReportMetric(float64(c.worker.Microseconds())/float64(c.units), workerMetric)
	b.ReportMetric(float64(c.postgres.Microseconds())/float64(c.units), "pg-µs/"+unit)
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
