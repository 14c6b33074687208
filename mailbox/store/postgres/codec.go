package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lib/pq"

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

// storeError wraps a database error with what was done. PostgreSQL's data exceptions (class
// 22: invalid text, a number out of range) and program limits (class 54: an index row too
// large) mean the value can never be stored; they wrap forge.ErrBadPayload too, so the edge
// answers 400 instead of asking the forge to retry.
func storeError(doing string, err error) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code.Class() {
		case "22", "54":
			return fmt.Errorf("%s: %w: %w", doing, forge.ErrBadPayload, err)
		}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// isForeignKeyViolation reports a PostgreSQL foreign_key_violation (23503).
func isForeignKeyViolation(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "23503"
}
