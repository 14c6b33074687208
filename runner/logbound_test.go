package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLogBufferKeepsHeadAndTail: under the bound the logs are kept whole; over it, the head
// (the session id) and the tail (the result) are kept around a marker saying how much was
// dropped, whatever the sizes of the writes, and memory stays at the bound.
func TestLogBufferKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	small := NewLogBuffer(64)
	_, _ = small.Write([]byte("session: abc\nresult\n"))
	require.Equal(t, "session: abc\nresult\n", string(small.Bytes()))
	require.Zero(t, LogDropped(small.Bytes()))

	for _, chunk := range []int{1, 7, 100, 4096} {
		b := NewLogBuffer(64)
		var all bytes.Buffer
		all.WriteString("session: abc\n")
		for i := range 1000 {
			fmt.Fprintf(&all, "line %d\n", i)
		}
		all.WriteString("the end\n")
		data := all.Bytes()
		for p := data; len(p) > 0; {
			k := min(chunk, len(p))
			_, _ = b.Write(p[:k])
			p = p[k:]
		}
		got := b.Bytes()
		require.True(t, bytes.HasPrefix(got, data[:32]), "chunk %d", chunk)
		require.True(t, bytes.HasSuffix(got, data[len(data)-32:]), "chunk %d", chunk)
		require.Equal(t, int64(len(data)-64), LogDropped(got), "chunk %d", chunk)
		require.Equal(t, int64(len(data)-64), b.Dropped())
		require.LessOrEqual(t, cap(b.head)+cap(b.tail), 64)
	}
}

// JoinLogs: a read after the end that kept everything is the log; one that dropped its head
// gets the followed head, its own complete tail, and the marker.
func TestJoinLogs(t *testing.T) {
	t.Parallel()
	followed, read := NewLogBuffer(64), NewLogBuffer(64)
	_, _ = followed.Write([]byte("session: abc\n" + string(bytes.Repeat([]byte("x"), 200))))
	_, _ = read.Write([]byte("rotated away\n" + string(bytes.Repeat([]byte("y"), 200)) + "\nthe result\n"))
	got := string(JoinLogs(followed, read))
	require.True(t, strings.HasPrefix(got, "session: abc\n"), got)
	require.True(t, strings.HasSuffix(got, "the result\n"), got)
	require.Positive(t, LogDropped([]byte(got)))

	short, whole := NewLogBuffer(64), NewLogBuffer(64)
	_, _ = short.Write([]byte("session: abc\nmiddle")) // the followed stream stopped short
	_, _ = whole.Write([]byte("session: abc\nmiddle\nthe end\n"))
	require.Equal(t, "session: abc\nmiddle\nthe end\n", string(JoinLogs(short, whole)), "the runtime kept the head")
	rotated := NewLogBuffer(64)
	_, _ = rotated.Write([]byte("later lines\nthe result\n"))
	got = string(JoinLogs(followed, rotated))
	require.True(t, strings.HasPrefix(got, "session: abc\n"), "the runtime rotated the head away: %s", got)
	require.True(t, strings.HasSuffix(got, "the result\n"), got)
	require.Positive(t, LogDropped([]byte(got)))

	// The runtime rotated the whole log away while the run was quiet, and it ended without
	// another byte: the read after the end is empty, and the followed log is the log.
	require.Equal(t, string(followed.Bytes()), string(JoinLogs(followed, NewLogBuffer(64))))

	// The runtime rotated the head away and the current file, read whole, is longer than half
	// the bound: the joined log keeps the followed head and the read's last half, no more.
	long := NewLogBuffer(64)
	_, _ = long.Write([]byte(strings.Repeat("w", 40) + "\nthe result\n"))
	require.Zero(t, long.Dropped())
	got = string(JoinLogs(followed, long))
	require.True(t, strings.HasPrefix(got, "session: abc\n"), got)
	require.True(t, strings.HasSuffix(got, "the result\n"), got)
	require.LessOrEqual(t, len(got)-len(markerOf(got)), 64, got)
	require.GreaterOrEqual(t, LogDropped([]byte(got)), followed.Dropped(), got)

	// A run cannot hide a flood behind a short current file: it floods, waits for the
	// runtime to rotate, prints a few bytes that start as the flood did and ends. The read
	// after the end saw less than the followed stream did: the log was rotated, not whole.
	flood, short2 := NewLogBuffer(64), NewLogBuffer(64)
	_, _ = flood.Write([]byte(strings.Repeat("A", 1000)))
	_, _ = short2.Write([]byte(strings.Repeat("A", 10)))
	require.GreaterOrEqual(t, LogDropped(JoinLogs(flood, short2)), flood.Dropped())
}

// markerOf returns the dropped-bytes marker in logs, "" when there is none.
func markerOf(logs string) string {
	return string(droppedMarker.Find([]byte(logs)))
}

// TestFollowerKeepsWhatItReadWhenTheStreamBreaks: the followed stream breaks mid-run (an API
// server or a kubelet restarting) after it kept the session line: Logs still returns it, for
// JoinLogs to take the head from.
func TestFollowerKeepsWhatItReadWhenTheStreamBreaks(t *testing.T) {
	t.Parallel()
	f := FollowLogs(func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(strings.NewReader("session: 5e55a0e1\n"), brokenStream{})), nil
	}, func(stdout, _ io.Writer, r io.Reader) error {
		_, err := io.Copy(stdout, r)
		return err
	}, 64)
	f.MarkEnded()
	out, _, ok, err := f.Logs(t.Context())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "session: 5e55a0e1\n", string(out.Bytes()))
}

// brokenStream fails every read, as a stream whose connection the server closed.
type brokenStream struct{}

func (brokenStream) Read([]byte) (int, error) {
	return 0, errors.New("http2: server sent GOAWAY and closed the connection")
}

// The marker is Alfred's, not the agent's: a run that prints one of its own (claiming a flood,
// or none, or so much that two would overflow) is not believed; only the marker this process's
// buffer wrote counts.
func TestLogDroppedTrustsOnlyItsOwnMarker(t *testing.T) {
	t.Parallel()
	forged := "\n[… alfred: 9223372036854775807 bytes of output dropped here …]\n"
	require.Zero(t, LogDropped([]byte("start"+forged+"end")), "a marker the run printed")
	b := NewLogBuffer(64)
	_, _ = b.Write([]byte("\n[… alfred: 0 bytes of output dropped here …]\n" + strings.Repeat("z", 500)))
	require.Equal(t, int64(500+len("\n[… alfred: 0 bytes of output dropped here …]\n")-64), LogDropped(b.Bytes()),
		"the run's own marker first does not hide the real one")
}

// A flood's cut between head and tail may split a secret the run printed: the stored log is
// censored before it is cut further, and the margin on each side of the marker drops the
// parts the censor cannot recognise; the session line and the result stay.
func TestRedactLogsLeavesNoPartOfASecretAtTheCut(t *testing.T) {
	t.Parallel()
	const secret = "sk-ant-api03-0123456789abcdefghijKLMNOP"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
	const bound = 256 << 10
	for _, k := range []int{1, 9, len(secret) - 1} {
		b := NewLogBuffer(bound)
		filler := strings.Repeat("x", bound/2-len("session: abc\n")-k)
		_, _ = b.Write([]byte("session: abc\n" + filler + secret + strings.Repeat("y", 3*bound)))
		// and the tail starts within another occurrence
		_, _ = b.Write([]byte(secret[k:] + strings.Repeat("z", bound/2-len(secret)+k-len("the result\n")) + "the result\n"))
		got := RedactLogs(b.Bytes(), redact)
		require.True(t, strings.HasPrefix(got, "session: abc\n"), "k=%d", k)
		require.True(t, strings.HasSuffix(got, "the result\n"), "k=%d", k)
		for n := 4; n < len(secret); n++ {
			require.NotContains(t, got, secret[:n]+"\n[", "k=%d: the head ends with part of the secret", k)
			require.NotContains(t, got, "]\n"+secret[len(secret)-n:], "k=%d: the tail starts with part of the secret", k)
		}
		require.GreaterOrEqual(t, LogDropped([]byte(got)), b.Dropped(), "k=%d", k)
	}
	require.Equal(t, "no [redacted] here", RedactLogs([]byte("no "+secret+" here"), redact), "no marker: censored whole")
}
