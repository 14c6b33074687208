package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A package is printed when it ends, not in import-path order; the packages still running are
// listed with their time; a failing package's output is printed; the summary says which failed and closes with the tests' counts.
func TestProgressPrintsEachPackageAsItEnds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	p := newProgress(&out, func() time.Time { return now })
	stream := func(lines ...string) {
		require.NoError(t, p.read(strings.NewReader(strings.Join(lines, "\n")+"\n")))
	}
	stream(`{"Action":"start","Package":"x/cmd/alfred"}`,
		`{"Action":"start","Package":"x/mailbox"}`,
		`{"Action":"start","Package":"x/doc"}`,
		`{"Action":"output","Package":"x/doc","Output":"?   \tx/doc\t[no test files]\n"}`,
		`{"Action":"skip","Package":"x/doc","Elapsed":0}`,
		`{"Action":"run","Package":"x/mailbox","Test":"TestA"}`,
		`{"Action":"output","Package":"x/mailbox","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"pass","Package":"x/mailbox","Test":"TestA/sub","Elapsed":0.1}`,
		`{"Action":"pass","Package":"x/mailbox","Test":"TestA","Elapsed":0.1}`,
		`{"Action":"skip","Package":"x/mailbox","Test":"TestS","Elapsed":0}`,
		`{"Action":"pass","Package":"x/mailbox","Elapsed":2.5}`)
	require.Equal(t, "ok    x/mailbox 2.5s\n", out.String(), "the later package is printed when it ends; no line for no test files")

	out.Reset()
	now = now.Add(3 * time.Minute)
	p.running()
	require.Equal(t, "...   running: x/cmd/alfred (3m0s); 2 done\n", out.String())

	out.Reset()
	stream(`{"Action":"output","Package":"x/cmd/alfred","Test":"TestB","Output":"    b_test.go:9: boom\n"}`,
		`{"Action":"fail","Package":"x/cmd/alfred","Test":"TestB","Elapsed":1}`,
		`{"Action":"output","Package":"x/cmd/alfred","Output":"FAIL\n"}`,
		`{"Action":"fail","Package":"x/cmd/alfred","Elapsed":180}`,
		`{"ImportPath":"x/broken [x/broken.test]","Action":"build-output","Output":"broken.go:1: syntax error\n"}`,
		`{"ImportPath":"x/broken [x/broken.test]","Action":"build-fail"}`)
	require.Contains(t, out.String(), "b_test.go:9: boom")
	require.Contains(t, out.String(), "FAIL  x/cmd/alfred 3m0s\n")
	require.Contains(t, out.String(), "broken.go:1: syntax error\n")
	out.Reset()
	require.False(t, p.summary())
	require.Equal(t, "FAILED: x/cmd/alfred, x/broken [x/broken.test] (build)\ntests: 1 passed, 1 failed, 1 skipped\n", out.String(),
		"the closing line counts top-level tests, not subtests")
}
