package webhook_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/webhook"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// BenchmarkIngest measures the webhook edge end to end on each store: a signed Forgejo comment
// delivery over real HTTP (loopback), verified, parsed, stored in its mailbox's inbox, answered
// 202. It reports deliveries per second and the p50/p99 acknowledgement latency, for the
// embedded SQLite store and for PostgreSQL side by side. Each delivery has its own id and body
// (a distinct comment), spread over 50 issues.
func BenchmarkIngest(b *testing.B) {
	b.Run("store=sqlite", func(b *testing.B) {
		store, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "alfred.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		benchmarkIngest(b, store)
	})
	b.Run("store=postgres", func(b *testing.B) {
		db, _ := pgtest.New(b)
		benchmarkIngest(b, postgres.New(db, nil))
	})
}

func benchmarkIngest(b *testing.B, store *sqlstore.Store) {
	src, err := forgejo.NewSource(forgejo.SourceConfig{Secrets: []string{"bench-secret"}})
	if err != nil {
		b.Fatal(err)
	}
	rc, err := webhook.NewReceiver(webhook.ReceiverConfig{Sources: map[string]webhook.Source{"forgejo": src},
		Inbox: store, Ready: store.Ping, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tmpl, err := os.ReadFile(fixturePath(b, "forgejo-live/006-issue_comment-created.json"))
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	var seq atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	b.SetParallelism(4) // 4 × GOMAXPROCS concurrent senders
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 256)
		for pb.Next() {
			n := seq.Add(1)
			req := forgetest.NewForgejoRequest(srv.URL+"/webhooks/forgejo", "issue_comment",
				fmt.Sprintf("bench-%d", n), "bench-secret", commentDelivery(tmpl, n, 50))
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_ = resp.Body.Close()
			local = append(local, time.Since(t0))
			if resp.StatusCode != http.StatusAccepted {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
