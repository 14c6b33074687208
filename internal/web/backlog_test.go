package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

// Every page's header shows the events waiting to be applied, as the store reads them; a
// failed read shows nothing, and the page is served.
func TestBacklogInTheHeader(t *testing.T) {
	t.Parallel()
	mem := webtest.NewMemory()
	mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: 5, Repo: "a/b", Number: 1}})
	for _, tc := range []struct {
		name   string
		events int
		oldest time.Duration
		err    error
		want   string
	}{
		{"none", 0, 0, nil, `<span class="backlog" title="stored events the workers have not applied yet">events waiting: 0</span>`},
		{"backlog", 30093, 12*time.Second + 400*time.Millisecond, nil, ">events waiting: 30,093, the oldest for 12s</span>"},
		{"read fails", 0, 0, errors.New("database down"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := web.New(web.Config{Reader: mem, Redact: func(s string) string { return s },
				Backlog: func(context.Context) (int, time.Duration, error) { return tc.events, tc.oldest, tc.err }})
			require.NoError(t, err)
			for _, page := range []string{"/", "/mailboxes/5"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, web.Prefix+page, nil))
				require.Equal(t, http.StatusOK, rec.Code, page)
				if tc.want == "" {
					require.NotContains(t, rec.Body.String(), `class="backlog"`, page)
					continue
				}
				require.Contains(t, rec.Body.String(), tc.want, page)
			}
		})
	}
}
