package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/alfred-bot/alfred/internal/base/censor"
)

// MaxLogBytes bounds what a Runtime keeps of one stream of a run's output (stdout, stderr):
// its first MaxLogBytes/2 bytes, where a CLI prints its session id, and its last
// MaxLogBytes/2, where it prints its final result and usage. A run that writes more (a flood:
// hundreds of megabytes) costs this much memory per stream, not its size.
const MaxLogBytes = 8 << 20

// LogBuffer is an io.Writer that keeps the head and the tail of what is written to it, up to
// a bound, and counts what it dropped in between. The zero value is not usable; see
// NewLogBuffer.
type LogBuffer struct {
	head, tail []byte // tail is a ring of len cap(tail) once full
	half       int
	pos        int   // next write position in the ring
	full       bool  // the ring has wrapped
	dropped    int64 // bytes written between head and tail that are not kept
}

// NewLogBuffer returns a LogBuffer keeping max/2 bytes of head and max/2 of tail (max ≤ 0:
// MaxLogBytes).
func NewLogBuffer(max int) *LogBuffer {
	if max <= 0 {
		max = MaxLogBytes
	}
	half := max / 2
	return &LogBuffer{half: half, head: make([]byte, 0, half), tail: make([]byte, 0, half)}
}

// Write keeps p's bytes in the head while it has room, then in the tail ring; it never fails.
func (b *LogBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.half - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if b.half == 0 {
		b.dropped += int64(len(p))
		return n, nil
	}
	for len(p) > 0 {
		if !b.full {
			k := min(b.half-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			if len(b.tail) == b.half {
				b.full, b.pos = true, 0
			}
			continue
		}
		k := min(b.half-b.pos, len(p))
		b.dropped += int64(k) // the bytes overwritten leave the tail
		copy(b.tail[b.pos:], p[:k])
		b.pos = (b.pos + k) % b.half
		p = p[k:]
	}
	return n, nil
}

// written returns how many bytes were written to b.
func (b *LogBuffer) written() int64 { return int64(len(b.head)+len(b.tail)) + b.dropped }

// Dropped returns how many bytes were written between the head and the tail and not kept.
func (b *LogBuffer) Dropped() int64 { return b.dropped }

// Bytes returns the head, then, when bytes were dropped, a marker line saying how many (see
// LogDropped), then the tail.
func (b *LogBuffer) Bytes() []byte { return join(b, b, b.dropped) }

// JoinLogs returns the logs of one stream read twice: followed, from the moment the container
// ran (its head survives the runtime's rotation), and read again once it ended (its tail is
// complete: a followed stream may end before the last lines when the runtime rotated the log
// meanwhile). When the second read starts as the followed stream did and holds at least as
// many bytes, the runtime kept the head and the second read is the log. Otherwise (a read
// that starts the same but is shorter is what a run leaves that flooded, waited for the
// rotation and printed a few bytes more) the log is the head of the first and the last half
// bound bytes of the second around the marker (at least that many bytes dropped), within the
// bound. An empty second read (the runtime rotated the whole log away and the container wrote
// nothing after) is no log: the followed one is.
func JoinLogs(followed, read *LogBuffer) []byte {
	if len(read.head) == 0 {
		return followed.Bytes()
	}
	n := min(len(followed.head), len(read.head))
	if bytes.Equal(followed.head[:n], read.head[:n]) && read.written() >= followed.written() {
		return read.Bytes()
	}
	return join(followed, read, max(followed.dropped, read.dropped, 1))
}

// join writes head's head, the marker (when dropped > 0) and tail's tail, oldest byte first.
// When tail is another buffer that kept all it saw, its head is part of the tail too, cut to
// its last half bound bytes, and what is cut counts as dropped.
func join(head, tail *LogBuffer, dropped int64) []byte {
	var rest []byte
	if tail.full {
		rest = append(append(rest, tail.tail[tail.pos:]...), tail.tail[:tail.pos]...)
	} else {
		rest = tail.tail
	}
	if head != tail && tail.dropped == 0 {
		rest = append(append([]byte(nil), tail.head...), rest...)
		if cut := len(rest) - head.half; cut > 0 {
			rest = rest[cut:]
			dropped = max(dropped, int64(cut))
		}
	}
	var out bytes.Buffer
	out.Grow(len(head.head) + len(rest) + 64)
	out.Write(head.head)
	if dropped > 0 {
		fmt.Fprintf(&out, "\n[… alfred %s: %d bytes of output dropped here …]\n", markerNonce, dropped)
	}
	out.Write(rest)
	return out.Bytes()
}

// markerNonce is in every dropped-bytes marker this process writes, drawn at start: a run
// cannot print a marker LogDropped believes (claiming a flood, or hiding one), since it never
// sees the nonce (the marker is written into Alfred's buffer, not the container's output).
var markerNonce = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

var droppedMarker = regexp.MustCompile(`\n\[… alfred ` + markerNonce + `: (\d+) bytes of output dropped here …\]\n`)

// RedactLogs returns logs censored by redact. Where a Runtime dropped bytes (the marker
// LogDropped reads), the head before it and the tail after it are censored apart (the marker
// untouched) and censor.Margin bytes are dropped on each side of it: the cut may have split a
// secret, whose two parts the censor cannot recognise; the marker then counts them too.
func RedactLogs(logs []byte, redact func(string) string) string {
	loc := droppedMarker.FindSubmatchIndex(logs)
	if loc == nil {
		return redact(string(logs))
	}
	dropped, _ := strconv.ParseInt(string(logs[loc[2]:loc[3]]), 10, 64)
	head, tail := redact(string(logs[:loc[0]])), redact(string(logs[loc[1]:]))
	h := max(0, len(head)-censor.Margin)
	for h > 0 && !utf8.RuneStart(head[h]) {
		h--
	}
	t := min(censor.Margin, len(tail))
	for t < len(tail) && !utf8.RuneStart(tail[t]) {
		t++
	}
	dropped += int64(len(head) - h + t)
	return head[:h] + fmt.Sprintf("\n[… alfred %s: %d bytes of output dropped here …]\n", markerNonce, dropped) + tail[t:]
}

// LogDropped returns the bytes a Runtime dropped from the middle of logs (the marker
// LogBuffer.Bytes writes, with this process's nonce), 0 when it kept them whole. A marker the
// run printed itself does not count.
func LogDropped(logs []byte) int64 {
	m := droppedMarker.FindSubmatch(logs)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// LogFollower streams a container's logs while it runs (a Runtime's Follow mode) into two
// LogBuffers, so that what the runtime rotates away later (Docker's json-file rotation, the
// kubelet's) is kept for the head, and a flood costs at most MaxLogBytes per stream. Runtimes
// start one when their Wait sees the container running and read it in Logs.
type LogFollower struct {
	cancel      context.CancelFunc
	done        chan struct{}
	mu          sync.Mutex
	out, errOut *LogBuffer
	ended       atomic.Bool // the runtime saw the container end (MarkEnded)
	opened      atomic.Bool // open returned the stream (Opened)
}

// FollowLogs starts streaming: open returns the followed stream (it ends when the container
// ends), and demux copies it into stdout and stderr (io.Copy into stdout for a merged log).
// The stream lives until it ends or Stop.
func FollowLogs(open func(ctx context.Context) (io.ReadCloser, error), demux func(stdout, stderr io.Writer, r io.Reader) error, max int) *LogFollower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &LogFollower{cancel: cancel, done: make(chan struct{}), out: NewLogBuffer(max), errOut: NewLogBuffer(max)}
	go func() {
		defer close(f.done)
		defer cancel()
		// A stream that fails keeps what it read (Logs): its error says nothing more.
		rc, err := open(ctx)
		if err == nil {
			f.opened.Store(true)
			_ = demux(lockedWriter{&f.mu, f.out}, lockedWriter{&f.mu, f.errOut}, rc)
			_ = rc.Close()
		}
	}()
	return f
}

// MarkEnded records that the container has ended (the runtime's Wait saw it): its stream
// ends with what it wrote.
func (f *LogFollower) MarkEnded() { f.ended.Store(true) }

// Logs waits for the stream's end (or ctx) and returns what it kept (see JoinLogs). ok is
// false while the container runs (a live page reads the logs so far without waiting for the
// end): the caller then uses only its own read. A stream that broke (an API server or kubelet
// restarting) still returns what it kept: its head is the log's, whatever came after.
func (f *LogFollower) Logs(ctx context.Context) (stdout, stderr *LogBuffer, ok bool, err error) {
	if !f.ended.Load() {
		return nil, nil, false, nil
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, nil, false, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out, f.errOut, true, nil
}

// Opened reports whether open has returned the stream. From then on a rotation cannot take
// what the stream has not read yet: the kubelet's follow reads a rotated file to its end
// before it opens the next one, and an attach is not read from a file at all.
func (f *LogFollower) Opened() bool { return f.opened.Load() }

// Stop ends the stream (the container is being removed).
func (f *LogFollower) Stop() { f.cancel() }

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
