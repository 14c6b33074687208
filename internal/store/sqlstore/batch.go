package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Grouped insertion of events (spec/edge.md, "What is stored"): concurrent deliveries into
// mailboxes whose ids are known are inserted together, one statement and one commit for a
// batch of them (Dialect.InsertEvents), by flushers that each take what is waiting when they
// are free. A lone delivery is a batch of one and waits for nobody; under load the batches grow with
// the number of deliveries in flight, so the database does less work per delivery as
// concurrency rises. Every delivery is still acknowledged only after its row is committed.
const (
	// defaultInsertFlushers is the number of batch statements in flight at once when the
	// dialect does not say (Dialect.InsertFlushers): enough to keep both the database and the
	// receiver busy, few enough that a burst makes batches.
	defaultInsertFlushers = 2
	// maxInsertBatch bounds the deliveries of one statement.
	maxInsertBatch = 64
)

// insertReq is one delivery waiting to be inserted into mailbox mailboxID; inert says it may
// be recorded processed on arrival (mailbox.InertAtRest, and the mailbox known to have had an
// event before: its first event is applied by a pass, which gives it its title and author).
type insertReq struct {
	ctx       context.Context // the caller's: its deadline bounds the batch
	mailboxID int64
	ev        forge.Event
	payload   string
	inert     bool
	done      chan insertRes // buffered: a flusher never waits for the caller
}

// insertRes is what became of an insertReq: inserted or a duplicate, recorded processed on
// arrival (atRest), whether the delivery id is stored with another body too (checked says the
// batch looked), or the error.
type insertRes struct {
	duplicate, atRest, others, checked bool
	err                                error
}

// inserter runs the flushers of one Store. They start on the first delivery and stop when the
// Store is closed.
type inserter struct {
	start   sync.Once
	closing sync.Once
	in      chan *insertReq
	// waiting counts the deliveries not yet taken by a flusher; statements and grouped the
	// statements of Dialect.InsertEvents run and the deliveries they carried (InsertStats).
	waiting, statements, grouped atomic.Int64
	// sql[n-1] is Dialect.InsertEvents(n), built by sqlOnce[n-1].
	sql     [maxInsertBatch]string
	sqlOnce [maxInsertBatch]sync.Once
	stop    chan struct{}
	wg      sync.WaitGroup
}

// InsertStats counts the grouped insertion of events (Dialect.InsertEvents), since the Store
// was made.
type InsertStats struct {
	// Statements is the number of grouped insert statements run, and Deliveries the number of
	// deliveries they carried: Deliveries/Statements is the mean group. A group whose statement
	// fails is inserted again one delivery at a time, outside these counts.
	Statements, Deliveries int64
	// Waiting is the number of deliveries waiting, now, for a flusher to take them.
	Waiting int64
}

// InsertStats returns the counts of grouped insertion.
func (s *Store) InsertStats() InsertStats {
	return InsertStats{Statements: s.batch.statements.Load(), Deliveries: s.batch.grouped.Load(),
		Waiting: s.batch.waiting.Load()}
}

func newInserter() *inserter {
	return &inserter{in: make(chan *insertReq), stop: make(chan struct{})}
}

// close stops the flushers, once, after their batch in flight.
func (b *inserter) close() {
	b.closing.Do(func() { close(b.stop) })
	b.wg.Wait()
}

// batchInsert inserts ev into mailbox id together with the deliveries in flight beside it.
// ctx bounds the wait for a flusher; once one holds the delivery, its answer is awaited
// whatever ctx does (the group runs at most to its latest deadline, batchContext), so a
// delivery answered with an error was not stored and one answered stored was committed.
func (s *Store) batchInsert(ctx context.Context, id int64, ev forge.Event, payload string, inert bool) insertRes {
	s.batch.start.Do(func() {
		for range cmp.Or(s.dialect.InsertFlushers, defaultInsertFlushers) {
			s.batch.wg.Add(1)
			go s.flusher()
		}
	})
	r := &insertReq{ctx: ctx, mailboxID: id, ev: ev, payload: payload, inert: inert, done: make(chan insertRes, 1)}
	s.batch.waiting.Add(1)
	select {
	case s.batch.in <- r:
		s.batch.waiting.Add(-1)
	case <-s.batch.stop:
		s.batch.waiting.Add(-1)
		return insertRes{err: errStoreClosed}
	case <-ctx.Done():
		s.batch.waiting.Add(-1)
		return insertRes{err: ctx.Err()}
	}
	// A flusher holds it now: its answer comes, bounded by the group's context (batchContext),
	// and is what happened to its row. Answering ctx's error here would report a failure for a
	// row the group may yet commit.
	return <-r.done
}

// flusher takes the first waiting delivery, and with it those waiting behind it (up to
// maxInsertBatch, without waiting for more), and inserts them, until the Store is closed.
func (s *Store) flusher() {
	defer s.batch.wg.Done()
	batch := make([]*insertReq, 0, maxInsertBatch)
	for {
		select {
		case r := <-s.batch.in:
			batch = append(batch[:0], r)
		case <-s.batch.stop:
			return
		}
	more:
		for len(batch) < maxInsertBatch {
			select {
			case r := <-s.batch.in:
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.flush(batch)
		clear(batch)
	}
}

// flush inserts batch in one statement and answers each delivery. When the statement fails
// (a value one delivery brought, a mailbox deleted meanwhile, an outage), each delivery is
// inserted alone, so that each gets its own answer.
func (s *Store) flush(batch []*insertReq) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	if res, err := s.insertBatch(ctx, batch); err == nil {
		for i, r := range batch {
			r.done <- res[i]
		}
		return
	}
	for _, r := range batch {
		dup, err := s.insertOne(ctx, r.mailboxID, r.ev, r.payload)
		r.done <- insertRes{duplicate: dup, err: err}
	}
}

// batchContext bounds a batch by the latest deadline of its deliveries, so that no delivery is
// cut short by another's, and by batchTimeout when one of them has none.
func batchContext(batch []*insertReq) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, r := range batch {
		d, ok := r.ctx.Deadline()
		if !ok {
			return context.WithTimeout(context.Background(), batchTimeout)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// batchTimeout bounds a batch statement when a delivery in it has no deadline of its own.
const batchTimeout = time.Minute

// errStoreClosed is returned to a delivery that arrives after Close.
var errStoreClosed = errors.New("store closed")

// eventKey identifies a stored delivery (the events table's unique key).
type eventKey struct{ forge, deliveryID, bodyHash string }

// insertEventColumns is the number of parameters of an event in Dialect.InsertEvents.
const insertEventColumns = 8

// InsertEventsFrom returns the part of Dialect.InsertEvents both engines share, for rows events:
// the WITH parts (without WITH) that name the rows v (mailbox_id, forge, delivery_id,
// body_hash, event_type, payload, received_at, inert, ord) and decide once a row (the
// MATERIALIZED part r: inlined or flattened, the check would run for each column it sets)
// whether it is recorded processed on arrival (at_rest: inert, its mailbox in a state of
// mailbox.RestStates, not purged by retention, with no pending event, in the statement's
// snapshot taken before the insert), and the insert from r in the rows' order, up to its
// ON CONFLICT DO NOTHING, to which the dialect adds what it returns. casts, when given, follow
// the parameters of the first row (the events' columns and inert) and then the clock's and the
// outcome's (PostgreSQL types its parameters by them; SQLite needs none). The WHERE clause is
// SQLite's rule for a SELECT before ON CONFLICT.
func InsertEventsFrom(rows int, casts []string) (with, insert string) {
	n := rows * insertEventColumns
	cast := func(i int) string {
		if i < len(casts) {
			return casts[i]
		}
		return ""
	}
	with = `v (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, inert, ord) AS (
	VALUES ` + eventValues(rows, casts) + `
), r AS MATERIALIZED (
	SELECT v.*, (v.inert
		AND EXISTS (SELECT 1 FROM mailboxes m WHERE m.id = v.mailbox_id AND m.state IN (` + stateList(mailbox.RestStates()) + `) AND m.purged_at IS NULL)
		AND NOT EXISTS (SELECT 1 FROM events p WHERE p.mailbox_id = v.mailbox_id AND p.processed_at IS NULL)) AS at_rest
	FROM v
)`
	insert = `INSERT INTO events (mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at, processed_at, outcome)
SELECT mailbox_id, forge, delivery_id, body_hash, event_type, payload, received_at,
	CASE WHEN at_rest THEN $` + strconv.Itoa(n+1) + cast(insertEventColumns) + ` END,
	CASE WHEN at_rest THEN $` + strconv.Itoa(n+2) + cast(insertEventColumns+1) + ` ELSE '' END
FROM r
WHERE true
ORDER BY ord
ON CONFLICT DO NOTHING`
	return with, insert
}

// insertBatch runs Dialect.InsertEvents over batch and returns each delivery's result, in
// batch's order. A delivery that came twice in one batch (a forge's retry racing the first
// attempt) is inserted once and the other is a duplicate. An inert delivery behind one of the
// same mailbox that is not is inserted pending: the statement's look-up of pending events sees
// only what was stored before it.
func (s *Store) insertBatch(ctx context.Context, batch []*insertReq) ([]insertRes, error) {
	args := make([]any, 0, insertEventColumns*len(batch)+2)
	inert := inertInBatch(batch)
	for i, r := range batch {
		args = append(args, r.mailboxID, r.ev.Forge, r.ev.DeliveryID, r.ev.BodyHash, string(r.ev.Type), r.payload, r.ev.ReceivedAt, inert[i])
	}
	args = append(args, s.now(), mailbox.OutcomeAtRest)
	s.batch.statements.Add(1)
	s.batch.grouped.Add(int64(len(batch)))
	inserted, err := s.runInsertEvents(ctx, len(batch), args)
	if err != nil {
		return nil, err
	}
	res := make([]insertRes, len(batch))
	for i, r := range batch {
		k := eventKey{r.ev.Forge, r.ev.DeliveryID, r.ev.BodyHash}
		got, ok := inserted[k]
		res[i] = insertRes{duplicate: !ok, atRest: got.atRest, others: got.others, checked: true}
		delete(inserted, k)
	}
	markOthersInBatch(batch, res)
	return res, nil
}

// insertedRow is what Dialect.InsertEvents says of an inserted event: recorded processed on
// arrival, its delivery id stored before with another body.
type insertedRow struct{ atRest, others bool }

// inertInBatch returns, for each delivery of batch, whether it may be recorded processed on
// arrival: it is inert, and no delivery before it in the batch into the same mailbox is not
// (that one waits for a pass, and so must everything behind it).
func inertInBatch(batch []*insertReq) []bool {
	out := make([]bool, len(batch))
	active := map[int64]bool{} // mailboxes with a delivery of the batch that waits for a pass
	for i, r := range batch {
		out[i] = r.inert && !active[r.mailboxID]
		if !out[i] {
			active[r.mailboxID] = true
		}
	}
	return out
}

// runInsertEvents runs Dialect.InsertEvents for rows events, prepared once per size, and
// returns the inserted deliveries.
func (s *Store) runInsertEvents(ctx context.Context, n int, args []any) (map[eventKey]insertedRow, error) {
	query := s.insertEventsSQL(n)
	var rows *sql.Rows
	var err error
	if stmt := s.prepared(ctx, query); stmt != nil {
		rows, err = stmt.QueryContext(ctx, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[eventKey]insertedRow{}
	for rows.Next() {
		var k eventKey
		var got insertedRow
		if err := rows.Scan(&k.forge, &k.deliveryID, &k.bodyHash, &got.atRest, &got.others); err != nil {
			return nil, err
		}
		out[k] = got
	}
	return out, rows.Err()
}

// insertEventsSQL returns Dialect.InsertEvents(n), built once per n.
func (s *Store) insertEventsSQL(n int) string {
	s.batch.sqlOnce[n-1].Do(func() { s.batch.sql[n-1] = s.dialect.InsertEvents(n) })
	return s.batch.sql[n-1]
}

// markOthersInBatch marks the inserted deliveries of batch whose delivery id another inserted
// delivery of the same batch has with another body (the statement's own look-up sees only
// what was stored before it).
func markOthersInBatch(batch []*insertReq, res []insertRes) {
	if len(batch) < 2 {
		return
	}
	first := make(map[[2]string]int, len(batch))
	for i, r := range batch {
		if res[i].duplicate {
			continue
		}
		k := [2]string{r.ev.Forge, r.ev.DeliveryID}
		j, seen := first[k]
		if !seen {
			first[k] = i
			continue
		}
		if batch[j].ev.BodyHash != r.ev.BodyHash {
			res[i].others, res[j].others = true, true
		}
	}
}

// eventValues returns the VALUES rows of Dialect.InsertEvents for rows events: the
// insertEventColumns parameters of each, numbered from $1 row by row, followed by the row's
// ordinal from 0 (the statement inserts in that order), and casts, when given, after the
// first row's parameters: "($1::bigint, …, $8::boolean, 0), ($9, …, $16, 1)".
func eventValues(rows int, casts []string) string {
	var b strings.Builder
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range insertEventColumns {
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(r*insertEventColumns + c + 1))
			if r == 0 && c < len(casts) {
				b.WriteString(casts[c])
			}
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r))
		b.WriteByte(')')
	}
	return b.String()
}
