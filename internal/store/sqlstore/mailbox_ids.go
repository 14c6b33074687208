package sqlstore

import (
	"context"
	"database/sql"
	"sync"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// maxCachedMailboxIDs bounds the mailbox ids a Store remembers: about 100 bytes each, so at
// most about 10 MB. When full the cache starts over.
const maxCachedMailboxIDs = 100_000

// mailboxKey is what identifies a mailbox: its issue or merge request.
type mailboxKey struct {
	forge, repo  string
	number       int64
	mergeRequest bool
}

// mailboxIDs remembers the ids of mailboxes by key, so that a delivery to a known mailbox is
// one plain insert instead of the look-up-or-create statement (spec/edge.md). A mailbox's key never changes; a deleted mailbox is noticed by
// the insert's foreign key and forgotten. Safe for concurrent use.
type mailboxIDs struct {
	mu  sync.Mutex
	max int
	ids map[mailboxKey]int64
}

func newMailboxIDs(max int) *mailboxIDs {
	return &mailboxIDs{max: max, ids: map[mailboxKey]int64{}}
}

func (c *mailboxIDs) get(k mailboxKey) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[k]
	return id, ok
}

func (c *mailboxIDs) put(k mailboxKey, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids) >= c.max {
		clear(c.ids)
	}
	c.ids[k] = id
}

func (c *mailboxIDs) forget(k mailboxKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, k)
}

// rememberMailbox looks the mailbox of k up and remembers its id; a failed look-up is left
// for the next delivery.
func (s *Store) rememberMailbox(ctx context.Context, k mailboxKey) {
	var id int64
	if err := s.db.GetContext(ctx, &id, sqlMailboxID, k.forge, k.repo, k.number, k.mergeRequest); err == nil {
		s.ids.put(k, id)
	}
}

// insertOne inserts the event into mailbox id alone (a group whose statement failed is
// inserted again this way, batch.go), with a statement prepared once per pool
// connection (one round trip instead of two) and reports a duplicate; a foreign key violation
// (the mailbox is gone) is returned as it is, for Deliver to look the mailbox up again.
func (s *Store) insertOne(ctx context.Context, id int64, ev forge.Event, payload string) (duplicate bool, err error) {
	args := []any{id, ev.Forge, ev.DeliveryID, ev.BodyHash, string(ev.Type), payload, ev.ReceivedAt}
	var res sql.Result
	if stmt := s.insertStmt.get(ctx, s.db, sqlInsertEvent); stmt != nil {
		res, err = stmt.ExecContext(ctx, args...)
	} else {
		res, err = s.db.ExecContext(ctx, sqlInsertEvent, args...)
	}
	if s.isForeignKeyViolation(err) {
		return false, err
	}
	if err != nil {
		return false, s.storeError("insert event", err)
	}
	n, _ := res.RowsAffected()
	return n == 0, nil
}
