package main

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// `alfred serve` is killed (SIGKILL) while 32 senders deliver 1,000 comments: every delivery it
// answered 202 or 200 before dying is stored. Started again, it takes the forge's retries of
// the others: each is stored once, whether its first attempt reached the database or not, and
// every event is processed.
func TestKillDuringBurstLosesNoAcknowledgedDelivery(t *testing.T) {
	// Serial: its burst measures the binary's answers under its own load alone; beside the
	// parallel tests the handling slots fill and some deliveries get 503 (spec/edge.md).
	const n, senders, killAfter = 1000, 32, 100
	env := startHostile(t)
	cases := env.burstCases(n)
	client := &http.Client{Timeout: 30 * time.Second}
	answers := make([]hostileAnswer, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				answers[i] = env.send(client, cases[i])
			}
		}()
	}
	require.Eventually(t, func() bool {
		var stored int
		require.NoError(t, env.db.Get(&stored, `SELECT count(*) FROM events`))
		return stored >= killAfter
	}, time.Minute, time.Millisecond, "the burst is being stored")
	env.kill()
	wg.Wait()

	storedOnce := func(a hostileAnswer) int {
		var c int
		require.NoError(t, env.db.Get(&c, `SELECT count(*) FROM events WHERE forge = 'forgejo' AND delivery_id = $1`,
			a.c.header.Get("X-Forgejo-Delivery")))
		return c
	}
	acked, lost := 0, 0
	var retry []hostileCase
	for _, a := range answers {
		switch a.status {
		case http.StatusAccepted, http.StatusOK:
			acked++
			require.Equal(t, 1, storedOnce(a), "delivery %s was answered %d before the kill", a.c.name, a.status)
		default:
			lost++
			retry = append(retry, a.c)
		}
	}
	require.Positive(t, acked, "some deliveries were answered before the kill")
	require.Positive(t, lost, "the kill cut some deliveries off")
	t.Logf("before the kill: %d answered, %d cut off", acked, lost)

	env.start()
	for _, a := range env.sendAll(retry, 8) {
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, a.status, "retry of %s: %s", a.c.name, a.body)
		require.Equal(t, 1, storedOnce(a), "delivery %s stored once", a.c.name)
	}
	var total, distinct int
	require.NoError(t, env.db.Get(&total, `SELECT count(*) FROM events WHERE delivery_id LIKE 'hostile-burst-%'`))
	require.NoError(t, env.db.Get(&distinct, `SELECT count(DISTINCT delivery_id) FROM events WHERE delivery_id LIKE 'hostile-burst-%'`))
	require.Equal(t, n, total, "every delivery stored")
	require.Equal(t, n, distinct, "none twice")
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, env.db.Get(&pending, `SELECT count(*) FROM events WHERE processed_at IS NULL`))
		return pending == 0
	}, time.Minute, 100*time.Millisecond, "every stored event is processed after the restart")
}
