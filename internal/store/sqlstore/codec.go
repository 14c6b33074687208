package sqlstore

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// storedEvent is the stored form of an event (events.payload): the event's JSON without HTML
// escaping, with the merge request's title and body left out when they equal the event's own
// (the parsers copy them), so that every text of the delivery is stored once. Each byte of
// delivery text costs at most two stored bytes (U+2028 and U+2029, three bytes each, are
// written as six-byte escapes; every other character as in the delivery or shorter), so a row
// is bounded by twice the body cap plus the fixed fields.
type storedEvent struct {
	forge.Event
	// Shared names the merge-request fields left out because they equal the event's:
	// "title", "body".
	Shared []string `json:"mr_shared,omitempty"`
}

// encodeEvent returns the stored form of ev.
func encodeEvent(ev forge.Event) (string, error) {
	se := storedEvent{Event: ev}
	if mr := ev.MergeRequest; mr != nil {
		cp := *mr
		if cp.Title != "" && cp.Title == ev.Title {
			cp.Title, se.Shared = "", append(se.Shared, "title")
		}
		if cp.Body != "" && cp.Body == ev.Body {
			cp.Body, se.Shared = "", append(se.Shared, "body")
		}
		se.MergeRequest = &cp
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(se); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// decodeEvent reads a stored event (encodeEvent's form, or a plain event JSON).
func decodeEvent(payload string) (forge.Event, error) {
	var se storedEvent
	if err := json.Unmarshal([]byte(payload), &se); err != nil {
		return forge.Event{}, err
	}
	ev := se.Event
	if ev.MergeRequest != nil {
		for _, f := range se.Shared {
			switch f {
			case "title":
				ev.MergeRequest.Title = ev.Title
			case "body":
				ev.MergeRequest.Body = ev.Body
			}
		}
	}
	return ev, nil
}

// storeError wraps a database error with what was done. A value the engine refused
// (Dialect.BadValue: PostgreSQL's data exceptions, class 22, and program limits, class 54)
// also wraps forge.ErrBadPayload: the input cannot be stored, whatever the state of the
// database, and is answered 400 rather than 503.
func (s *Store) storeError(doing string, err error) error {
	if s.dialect.BadValue != nil && s.dialect.BadValue(err) {
		return fmt.Errorf("%s: %w: %w", doing, forge.ErrBadPayload, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// isForeignKeyViolation reports the engine's foreign key violation (Dialect.ForeignKeyViolation).
func (s *Store) isForeignKeyViolation(err error) bool {
	return err != nil && s.dialect.ForeignKeyViolation != nil && s.dialect.ForeignKeyViolation(err)
}
