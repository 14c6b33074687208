package sqlstoretest

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// IngestMailboxes is how many issues BenchIngestRounds spreads its deliveries over (numbers 1
// to IngestMailboxes in forgejo's acme/shop).
const IngestMailboxes = 5

// BenchIngestRounds measures the cost of storing and processing a delivery as events
// accumulate: three rounds, each storing a round of deliveries (Deliver) spread over
// IngestMailboxes issues and, after each, reading its mailbox's pending events and marking
// them processed, as a pass does. Before the second and before the third round,
// SeedProcessedEvents stores that many processed events more in the same mailboxes in bulk,
// as a long ingest leaves them. Reported: ms per delivery of each round (ms-round1 …
// ms-round3) and ratio = ms-round3 / ms-round1 (1 when the cost does not depend on the events
// stored).
// The round is 300 deliveries and the seed 20,000 events unless ALFRED_BENCH_INGEST_ROUND
// and ALFRED_BENCH_INGEST_SEED say otherwise.
func BenchIngestRounds(b *testing.B, s *sqlstore.Store) {
	round, seedN := envInt("ALFRED_BENCH_INGEST_ROUND", 300), envInt("ALFRED_BENCH_INGEST_SEED", 20_000)
	ctx := b.Context()
	ms := make([]float64, 3)
	seq, seeds := 0, 0
	for range b.N {
		for r := range ms {
			if r > 0 {
				b.StopTimer()
				seeds++
				SeedProcessedEvents(b, s, seedN, "seed-"+strconv.Itoa(seeds))
				b.StartTimer()
			}
			start := time.Now()
			for range round {
				seq++
				ref := forge.IssueRef{Forge: "forgejo", Repo: "acme/shop", Number: int64(1 + seq%IngestMailboxes)}
				ev := forge.Event{Forge: "forgejo", DeliveryID: fmt.Sprintf("round-%d", seq), Type: forge.EventComment,
					Target: ref, Sender: forge.User{Login: "alice"}, Comment: &forge.Comment{ID: int64(seq), Body: fmt.Sprint("delivery ", seq)}}
				_, err := s.Deliver(ctx, ev)
				require.NoError(b, err)
				mb, err := s.Find(ctx, ref)
				require.NoError(b, err)
				pending, err := s.PendingEvents(ctx, mb.ID)
				require.NoError(b, err)
				for _, p := range pending {
					require.NoError(b, s.MarkProcessed(ctx, p.ID, "bench"))
				}
			}
			ms[r] += float64(time.Since(start).Microseconds()) / 1000 / float64(round)
		}
	}
	for r := range ms {
		ms[r] /= float64(b.N)
		b.ReportMetric(ms[r], "ms-round"+strconv.Itoa(r+1))
	}
	b.ReportMetric(ms[2]/ms[0], "ratio")
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
