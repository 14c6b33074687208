// Package mailboxtest holds doubles for testing code that uses the mailbox package: Store, an
// in-memory mailbox.Store that keeps the contracts the SQL store keeps (exclusive,
// expiring leases; events deduplicated by delivery and body; processed marks; atomic
// save-and-mark), so transition tests run in milliseconds. mailbox/storetest proves both
// stores against the same suite.
package mailboxtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ mailbox.Store = (*Store)(nil)

// Store is an in-memory mailbox.Store. The zero value is not usable; call NewStore.
type Store struct {
	now func() time.Time

	mu        sync.Mutex
	mailboxes []*mailbox.Mailbox // index = id-1
	events    []event            // index = id-1
	questions []mailbox.Question // index = id-1
	runs      []mailbox.Run      // index = id-1
	comments  map[commentKey]mailbox.PostedComment
	applied   map[[2]int64]int64 // (mailbox, comment id) → the event that claimed it
	// unfinished marks mailboxes the runner would record a live container for (see
	// SetLiveContainer).
	live map[int64]bool
	// cancels holds who asked to cancel a run, by run id (RequestCancel).
	cancels map[int64]string
}

type event struct {
	mailbox.StoredEvent
	forge, delivery, bodyHash string
	processed                 bool
	outcome                   string
	attempts                  int
	failed                    bool
	err                       string
}

type commentKey struct {
	mailbox int64
	key     string
}

// NewStore returns an empty store reading time from now (time.Now when nil).
func NewStore(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, comments: map[commentKey]mailbox.PostedComment{}, live: map[int64]bool{},
		applied: map[[2]int64]int64{}}
}

// clone deep-copies a mailbox, as a read from a database would.
func clone(m *mailbox.Mailbox) *mailbox.Mailbox {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("mailboxtest: encode mailbox: %v", err))
	}
	var out mailbox.Mailbox
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("mailboxtest: decode mailbox: %v", err))
	}
	return &out
}

func (s *Store) mailbox(id int64) (*mailbox.Mailbox, error) {
	if id < 1 || int(id) > len(s.mailboxes) {
		return nil, fmt.Errorf("get mailbox %d: %w", id, mailbox.ErrNotFound)
	}
	return s.mailboxes[id-1], nil
}

// Deliver implements mailbox.Inbox.
func (s *Store) Deliver(_ context.Context, ev forge.Event) (bool, error) {
	if ev.BodyHash == "" {
		payload, _ := json.Marshal(ev)
		sum := sha256.Sum256(payload)
		ev.BodyHash = hex.EncodeToString(sum[:])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = s.now()
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("%w: encode event: %w", forge.ErrBadPayload, err) // never storable
	}
	id, err := s.resolve(ev)
	if err != nil {
		return false, err
	}
	for _, e := range s.events {
		if e.forge == ev.Forge && e.delivery == ev.DeliveryID && e.bodyHash == ev.BodyHash {
			return true, nil
		}
	}
	se := mailbox.StoredEvent{ID: int64(len(s.events) + 1), MailboxID: id, Payload: string(payload), ReceivedAt: ev.ReceivedAt}
	s.events = append(s.events, event{StoredEvent: se, forge: ev.Forge, delivery: ev.DeliveryID, bodyHash: ev.BodyHash})
	return false, nil
}

// resolve follows mailbox.Inbox.Deliver: merge request number, then branch, then commit.
func (s *Store) resolve(ev forge.Event) (int64, error) {
	t := ev.Target
	find := func(match func(m *mailbox.Mailbox) bool, newest bool) (int64, bool) {
		var hit int64
		for _, m := range s.mailboxes {
			if m.Forge == t.Forge && m.Repo == t.Repo && !m.MergeRequest && match(m) {
				hit = m.ID
				if !newest {
					break
				}
			}
		}
		return hit, hit != 0
	}
	if t.MergeRequest || ev.Type == forge.EventPipeline {
		if t.Number != 0 {
			if id, ok := find(func(m *mailbox.Mailbox) bool { return m.MRNumber == t.Number }, false); ok {
				return id, nil
			}
		}
		branch, sha := mailbox.EventBranch(ev)
		if branch != "" {
			if id, ok := find(func(m *mailbox.Mailbox) bool {
				return m.Branch == branch && (m.MRNumber == 0 || t.Number == 0) // as sqlstore's sqlFindBotMailbox
			}, true); ok {
				return id, nil
			}
		}
		if sha != "" {
			if id, ok := find(func(m *mailbox.Mailbox) bool { return m.HeadSHA == sha }, true); ok {
				return id, nil
			}
		}
		if t.Number == 0 || ev.Type == forge.EventPipeline {
			return 0, mailbox.ErrNoMailboxForPipeline(ev)
		}
	}
	for _, m := range s.mailboxes {
		if m.Forge == t.Forge && m.Repo == t.Repo && m.Number == t.Number && m.MergeRequest == t.MergeRequest {
			return m.ID, nil
		}
	}
	now := s.now()
	m := &mailbox.Mailbox{ID: int64(len(s.mailboxes) + 1), Forge: t.Forge, Repo: t.Repo, Number: t.Number,
		MergeRequest: t.MergeRequest, State: mailbox.StateIdle, Labels: mailbox.StringList{},
		Assignees: mailbox.StringList{}, CreatedAt: now, UpdatedAt: now}
	s.mailboxes = append(s.mailboxes, m)
	return m.ID, nil
}

// PendingEvents implements mailbox.Inbox.
func (s *Store) PendingEvents(_ context.Context, mailboxID int64) ([]mailbox.StoredEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []mailbox.StoredEvent
	for _, e := range s.events {
		if e.MailboxID == mailboxID && !e.processed {
			se := e.StoredEvent
			if err := json.Unmarshal([]byte(se.Payload), &se.Event); err != nil {
				return nil, fmt.Errorf("decode event %d: %w", se.ID, err)
			}
			out = append(out, se)
		}
	}
	return out, nil
}

// MarkProcessed implements mailbox.Inbox.
func (s *Store) MarkProcessed(_ context.Context, eventID int64, outcome string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markProcessed(eventID, outcome)
	return nil
}

func (s *Store) markProcessed(eventID int64, outcome string) {
	if eventID >= 1 && int(eventID) <= len(s.events) {
		s.events[eventID-1].processed, s.events[eventID-1].outcome = true, outcome
	}
}

// Get implements mailbox.Mailboxes.
func (s *Store) Get(_ context.Context, id int64) (*mailbox.Mailbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.mailbox(id)
	if err != nil {
		return nil, err
	}
	return clone(m), nil
}

// Find reads the mailbox of an issue or merge request; an error wrapping mailbox.ErrNotFound
// when there is none.
func (s *Store) Find(_ context.Context, ref forge.IssueRef) (*mailbox.Mailbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.mailboxes {
		if m.Forge == ref.Forge && m.Repo == ref.Repo && m.Number == ref.Number && m.MergeRequest == ref.MergeRequest {
			return clone(m), nil
		}
	}
	return nil, fmt.Errorf("find mailbox %s: %w", ref, mailbox.ErrNotFound)
}

// Save implements mailbox.Mailboxes.
func (s *Store) Save(_ context.Context, mb *mailbox.Mailbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.save(mb)
}

func (s *Store) save(mb *mailbox.Mailbox) error {
	cur, err := s.fenced(mb)
	if err != nil {
		return err
	}
	next := clone(mb)
	next.Forge, next.Repo, next.Number, next.MergeRequest = cur.Forge, cur.Repo, cur.Number, cur.MergeRequest
	next.LeaseOwner, next.LeaseExpires, next.CreatedAt = cur.LeaseOwner, cur.LeaseExpires, cur.CreatedAt
	next.LeaseAttempts, next.Reconciled = cur.LeaseAttempts, cur.Reconciled
	next.UpdatedAt = s.now()
	s.mailboxes[mb.ID-1] = next
	return nil
}

// SaveProcessed implements mailbox.Mailboxes.
func (s *Store) SaveProcessed(_ context.Context, mb *mailbox.Mailbox, done []mailbox.Processed) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.save(mb); err != nil {
		return err
	}
	for _, g := range done {
		for _, id := range g.IDs {
			s.markProcessed(id, g.Outcome)
		}
	}
	return nil
}

// SaveData implements mailbox.Mailboxes.
func (s *Store) SaveData(_ context.Context, mb *mailbox.Mailbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.fenced(mb)
	if err != nil {
		return err
	}
	cur.Data = clone(mb).Data
	return nil
}

// fenced returns the stored mailbox mb saves over when its lease owner is still the one mb was
// read with (both free, or the same owner), as the SQL store's fenced saves; otherwise an
// error wrapping mailbox.ErrLeaseLost.
func (s *Store) fenced(mb *mailbox.Mailbox) (*mailbox.Mailbox, error) {
	cur, err := s.mailbox(mb.ID)
	if err != nil {
		return nil, err
	}
	if (cur.LeaseOwner == nil) != (mb.LeaseOwner == nil) || cur.LeaseOwner != nil && *cur.LeaseOwner != *mb.LeaseOwner {
		return nil, fmt.Errorf("save mailbox %d: its lease changed hands since it was read: %w", mb.ID, mailbox.ErrLeaseLost)
	}
	return cur, nil
}

// SetLiveContainer records (or forgets) that the runner keeps a live container for the
// mailbox, which makes it one of UnfinishedMailboxes.
func (s *Store) SetLiveContainer(mailboxID int64, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[mailboxID] = live
}

// Outcomes returns the outcomes recorded for the processed events of mailbox id, in delivery
// order: the mailbox's timeline as events.outcome holds it.
func (s *Store) Outcomes(id int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		if e.MailboxID == id && e.processed {
			out = append(out, e.outcome)
		}
	}
	return out
}
