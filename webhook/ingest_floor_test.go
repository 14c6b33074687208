package webhook_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// The variables that make the test binary serve BenchmarkIngestFloor's receiver (serveFloor)
// instead of running tests: set (serve on the listener handed over as fd 3), the file holding
// the payload it stores, and the database URL.
const (
	floorServeEnv    = "ALFRED_BENCH_FLOOR_SERVE"
	floorPayloadEnv  = "ALFRED_BENCH_FLOOR_PAYLOAD"
	floorDatabaseEnv = "ALFRED_BENCH_FLOOR_DATABASE_URL"
)

// BenchmarkIngestFloor measures the floor of BenchmarkIngestVsPgbench's ratio on this machine:
// the least a Go receiver can do per delivery, with the same signed deliveries, the same load
// generator and the same pgbench beside it in the same run. The receiver is a child process
// (this test binary, floorServeEnv) running Go's own HTTP server with one handler that reads
// the body, hashes it (SHA-256) and inserts the row pgbench inserts (the stored form of such a
// delivery, read once from an `alfred serve` child; the delivery's own id and body hash) with
// one prepared statement and its commit (lib/pq, a pool of 16) into a copy of the events
// table, then answers 202: no signature, no parsing, no grouping, no processing. It reports deliveries/s, pgbench-tps and their ratio
// (medians of 3 rounds) and the CPU per delivery of the receiver (floor-µs/delivery) and of
// PostgreSQL, at 1, 8 and 32 senders.
//
//	go test -run '^$' -bench IngestFloor -benchtime 15000x ./webhook/
func BenchmarkIngestFloor(b *testing.B) {
	if _, err := os.Stat(pgbenchPath); err != nil {
		b.Skipf("SKIPPING: %s not installed (postgresql-client)", pgbenchPath)
	}
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchIngestFloor(b, clients) })
	}
}

func benchIngestFloor(b *testing.B, clients int) {
	const rounds = 3
	if b.N < rounds {
		return // the framework's first probe (b.N = 1): nothing to measure in rounds
	}
	db, dsn := pgtest.New(b)
	tmpl, err := os.ReadFile(fixturePath(b, "forgejo-live/006-issue_comment-created.json"))
	if err != nil {
		b.Fatal(err)
	}
	// The row both insert is the one Alfred stores for such a delivery: one delivery through an
	// `alfred serve` child on the same schema gives it.
	alfred := startServeChild(b, benchPostgres, dsn, "floor-secret")
	payload := alfred.storedPayload(b, db, wireRequest(b, forgetest.NewForgejoRequest("http://"+alfred.addr+"/webhooks/forgejo",
		"issue_comment", "floor-0", "floor-secret", tmpl)))
	alfred.proc.Stop(b)
	if _, err := db.ExecContext(b.Context(), `CREATE TABLE floor_events (LIKE events INCLUDING ALL)`); err != nil {
		b.Fatal(err)
	}
	table, err := pgbenchSetup(db, payload)
	if err != nil {
		b.Fatal(err)
	}
	payloadFile := filepath.Join(b.TempDir(), "payload")
	if err := os.WriteFile(payloadFile, []byte(payload), 0o600); err != nil {
		b.Fatal(err)
	}
	// The listener is opened here and handed to the child (its fd 3): connections wait in its
	// backlog until the child accepts them, so nothing has to wait for the child to listen.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	lnFile, err := ln.(*net.TCPListener).File()
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), floorServeEnv+"=1", floorPayloadEnv+"="+payloadFile, floorDatabaseEnv+"="+dsn)
	child.ExtraFiles = []*os.File{lnFile}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	_ = lnFile.Close()
	_ = ln.Close() // the child holds its own copy
	var seq int64
	wire := func() []byte {
		seq++
		return wireRequest(b, forgetest.NewForgejoRequest("http://"+addr+"/webhooks/forgejo", "issue_comment",
			fmt.Sprintf("floor-%d", seq), "floor-secret", commentDelivery(tmpl, seq, 1)))
	}
	pid := child.Process.Pid
	var vs vsPgbench
	b.ResetTimer()
	for r := range rounds {
		reqs := roundRequests(b, r, rounds, wire)
		cpu0 := readCPU(pid)
		start := time.Now()
		got, err := sendRound(addr, clients, reqs)
		elapsed := time.Since(start)
		cpu1 := readCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		vs.round(b, table, clients, pid, cpu0, cpu1, len(got), elapsed)
	}
	b.StopTimer()
	vs.report(b, "floor-µs/delivery")
	var stored int
	if err := db.GetContext(context.Background(), &stored, `SELECT count(*) FROM floor_events`); err != nil {
		b.Fatal(err)
	}
	if stored != b.N {
		b.Fatalf("the floor receiver stored %d of %d deliveries", stored, b.N)
	}
}

// serveFloor is BenchmarkIngestFloor's receiver: Go's HTTP server on the listener the parent
// handed over as fd 3, each delivery inserted into floor_events of the database at dsn with
// one statement, with the payload in the file payloadFile. It returns only on error.
func serveFloor(payloadFile, dsn string) error {
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return err
	}
	payload, err := os.ReadFile(payloadFile)
	if err != nil {
		return err
	}
	db, err := sqlx.Connect("postgres", dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	insert, err := db.Prepare(`INSERT INTO floor_events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at, outcome)
		VALUES (1, 'forgejo', $1, $2, 'comment', $3, $4, $4, '` + mailbox.OutcomeAtRest + `')`)
	if err != nil {
		return err
	}
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(body)
		if _, err := insert.ExecContext(r.Context(), r.Header.Get("X-Forgejo-Delivery"), hex.EncodeToString(sum[:]), string(payload), time.Now()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
}
