package forge

import "time"

// StorableTime returns t, or the zero time when t's year in UTC is before 0 or after 9999:
// such a time cannot be written as RFC 3339 (encoding/json refuses it), so an event or a
// mailbox that held it could never be stored. A forge sends nothing like it; a forged payload
// may.
func StorableTime(t time.Time) time.Time {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}
	}
	return t
}
