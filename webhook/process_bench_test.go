package webhook_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// processIssues is how many issues the deliveries of BenchmarkIngestVsProcessing's
// mailboxes=50 cases are spread over: the odd ones idle (known mailboxes Alfred is not
// assigned to), the even ones waiting for the plan's validation with Alfred assigned. The
// mailboxes=each cases spread them over b.N issues, one delivery each, so that every event
// costs a pass of its own.
const processIssues = 50

// BenchmarkIngestVsProcessing measures, in the same run and on each store, how fast the webhook
// edge stores deliveries and how fast the event workers (mailbox.Workers as `alfred serve`
// wires them: the default worker count, poll interval and pool) process them, at 8 and 32
// senders. The deliveries are signed Forgejo comments that start no run: on known mailboxes,
// half of them idle (their comments recorded processed on arrival, mailbox.InertAtRest) and
// half waiting for a plan's validation with Alfred assigned (a comment there changes nothing,
// but a pass applies it). Two rounds of b.N deliveries each:
//
//   - apart: the burst is stored with the workers stopped (stored/s), leaving pending events
//     for the workers, which then drain that backlog (processed/s: pending over the time from
//     their start until no event is left unprocessed); ratio is the time the burst took to
//     store over the time its backlog took to drain, at least 1 when the backlog drains as fast
//     as it built up;
//   - together: the workers run during the burst, as in production; backlog is what is left
//     unprocessed when the last delivery is answered, and drain-ms how long it then takes to
//     process it.
//
// forge-calls counts the calls the workers made to the forge (none are needed). The deliveries
// go to processIssues known mailboxes (mailboxes=50) or to b.N known mailboxes, one each
// (mailboxes=each, at 8 senders: every event is a pass of its own, claim and release included).
//
//	go test -run '^$' -bench 'IngestVsProcessing/./senders/mailboxes=50' -benchtime 3000x ./webhook/
//	go test -run '^$' -bench 'IngestVsProcessing/./senders/mailboxes=each' -benchtime 1000x ./webhook/
func BenchmarkIngestVsProcessing(b *testing.B) {
	for _, engine := range []string{"postgres", "sqlite"} {
		for _, senders := range []int{8, 32} {
			b.Run(fmt.Sprintf("store=%s/senders=%d/mailboxes=50", engine, senders), func(b *testing.B) {
				benchIngestVsProcessing(b, openBenchStore(b, engine), senders, processIssues)
			})
		}
		b.Run(fmt.Sprintf("store=%s/senders=8/mailboxes=each", engine), func(b *testing.B) {
			benchIngestVsProcessing(b, openBenchStore(b, engine), 8, b.N)
		})
	}
}

// openBenchStore opens an empty store of engine with the pool `alfred serve` configures.
func openBenchStore(b *testing.B, engine string) *sqlstore.Store {
	if engine == "sqlite" {
		store, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "alfred.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = store.Close() })
		return store
	}
	db, _ := pgtest.New(b)
	d := config.Default().Database
	db.SetMaxOpenConns(d.MaxOpenConns)
	db.SetMaxIdleConns(d.MaxIdleConns)
	db.SetConnMaxLifetime(d.ConnMaxLifetime)
	db.SetConnMaxIdleTime(d.ConnMaxIdleTime)
	return postgres.New(db, nil)
}

// benchIngestVsProcessing runs the rounds BenchmarkIngestVsProcessing describes on store, with
// the deliveries spread over issues mailboxes.
func benchIngestVsProcessing(b *testing.B, store *sqlstore.Store, senders, issues int) {
	ctx := context.Background()
	defaults := config.Default()
	fake := forgetest.NewFake(forge.KindForgejo)
	quiet := slog.New(slog.DiscardHandler)
	machine := mailbox.NewMachine(mailbox.Config{}, store,
		map[string]mailbox.Bot{"forgejo": {Forge: fake, Login: "bot"}}, nil, nil, quiet)
	w := defaults.Workers
	workers := mailbox.NewWorkers(mailbox.WorkerConfig{Count: w.Count, LeaseTTL: w.LeaseTTL, Poll: w.PollInterval,
		Runs: w.Runs, RunsPerProject: w.RunsPerProject}, store, machine, quiet)

	src, err := forgejo.NewSource(forgejo.SourceConfig{Secrets: []string{"bench-secret"}})
	if err != nil {
		b.Fatal(err)
	}
	rc, err := webhook.NewReceiver(webhook.ReceiverConfig{Sources: map[string]webhook.Source{"forgejo": src},
		Inbox: mailbox.WakingInbox{Inbox: store, Workers: workers}, Ready: store.Ping, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	srv := limitedServer(defaults, rc)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	tmpl, err := os.ReadFile(fixturePath(b, "forgejo-live/006-issue_comment-created.json"))
	if err != nil {
		b.Fatal(err)
	}
	var seq int64
	burst := func(n int) [][]byte {
		reqs := make([][]byte, n)
		for i := range reqs {
			seq++
			reqs[i] = wireRequest(b, forgetest.NewForgejoRequest(srv.URL+"/webhooks/forgejo", "issue_comment",
				fmt.Sprintf("process-%d", seq), "bench-secret", commentDelivery(tmpl, seq, issues)))
		}
		return reqs
	}
	db := store.DB()
	// waitDrained waits until no event is left unprocessed and returns when it saw it.
	waitDrained := func() time.Time {
		waitProcessed(b, db, 5*time.Millisecond)
		return time.Now()
	}
	var wg sync.WaitGroup
	var stop context.CancelFunc
	startWorkers := func() {
		var wctx context.Context
		wctx, stop = context.WithCancel(ctx)
		wg.Go(func() { workers.Run(wctx) })
	}
	stopWorkers := func() { stop(); wg.Wait() }

	// The mailboxes: one delivery per issue, then half of them moved to waiting_validation with
	// Alfred assigned.
	if _, err := sendRound(addr, 1, burst(issues)); err != nil {
		b.Fatal(err)
	}
	startWorkers()
	waitDrained()
	stopWorkers()
	for n := int64(2); n <= int64(issues); n += 2 {
		mb, err := store.Find(ctx, forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: n})
		if err != nil {
			b.Fatal(err)
		}
		mb.State, mb.Assignees = mailbox.StateWaitingValidation, mailbox.StringList{"bot"}
		if err := store.Save(ctx, mb); err != nil {
			b.Fatal(err)
		}
	}
	calls0 := len(fake.Calls())

	b.ResetTimer()
	// Apart: the burst stored with the workers stopped, then drained.
	reqs := burst(b.N)
	t0 := time.Now()
	if _, err := sendRound(addr, senders, reqs); err != nil {
		b.Fatal(err)
	}
	stored := time.Since(t0)
	pending := unprocessed(b, db) // the idle mailboxes' comments were recorded on arrival
	t1 := time.Now()
	startWorkers()
	processed := waitDrained().Sub(t1)
	stopWorkers()

	// Together: the workers run during the burst.
	b.StopTimer()
	reqs = burst(b.N)
	startWorkers()
	b.StartTimer()
	t2 := time.Now()
	if _, err := sendRound(addr, senders, reqs); err != nil {
		b.Fatal(err)
	}
	together := time.Since(t2)
	backlog := unprocessed(b, db)
	t3 := time.Now()
	drain := waitDrained().Sub(t3)
	b.StopTimer()
	stopWorkers()

	// The backlog built up at pending/stored and drained at pending/processed.
	b.ReportMetric(float64(b.N)/stored.Seconds(), "stored/s")
	b.ReportMetric(float64(pending), "pending")
	b.ReportMetric(float64(pending)/processed.Seconds(), "processed/s")
	b.ReportMetric(stored.Seconds()/processed.Seconds(), "ratio")
	b.ReportMetric(float64(b.N)/together.Seconds(), "together-stored/s")
	b.ReportMetric(float64(backlog), "backlog")
	b.ReportMetric(float64(drain.Microseconds())/1000, "drain-ms")
	b.ReportMetric(float64(len(fake.Calls())-calls0), "forge-calls")
}
