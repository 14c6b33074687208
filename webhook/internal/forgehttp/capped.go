package forgehttp

import (
	"fmt"
	"io"
	"net/http"
)

// MaxAnswerBytes bounds the body of one answer of a forge's API that Alfred reads (64 MiB, far
// above any page of a list): a forge, or something posing as one, that sends without end
// makes the call fail instead of the process grow.
const MaxAnswerBytes = 64 << 20

// CapAnswers returns rt (http.DefaultTransport when nil) with every answer's body cut at
// maxBytes: reading past it fails with an error saying so.
func CapAnswers(rt http.RoundTripper, maxBytes int64) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return cappedTransport{rt: rt, max: maxBytes}
}

type cappedTransport struct {
	rt  http.RoundTripper
	max int64
}

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &cappedBody{rc: resp.Body, left: t.max, max: t.max}
	}
	return resp, err
}

// cappedBody reads rc up to max bytes, then fails.
type cappedBody struct {
	rc        io.ReadCloser
	left, max int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly max bytes from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("the forge's answer is larger than %d bytes", b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
