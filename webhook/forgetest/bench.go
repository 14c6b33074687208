package forgetest

import (
	"net/http"
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
)

// ParseBenchCase is one delivery that BenchParse parses: its name in the sub-benchmark names, its
// request headers and its body.
type ParseBenchCase struct {
	Name   string
	Header http.Header
	Body   []byte
}

// RecordedParseBenchCase loads the recorded delivery at path (recorded.Load) as the case name;
// headers given as name, value pairs are set over the recorded ones.
func RecordedParseBenchCase(b *testing.B, name, path string, headers ...string) ParseBenchCase {
	b.Helper()
	header, body, err := recorded.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		header.Set(headers[i], headers[i+1])
	}
	return ParseBenchCase{Name: name, Header: header, Body: body}
}

// ParseBenchDecoder is a decoding that BenchParse measures next to Parse: Decode decodes body
// into fresh values of the types the parser decodes into, and returns the first error.
type ParseBenchDecoder struct {
	Name   string
	Decode func(body []byte) error
}

// BenchParse runs, for each case, the sub-benchmark CASE/Parse (parse of the delivery, as a
// Source's Parse: headers, decoding, routing to the event) and CASE/DECODER for each decoder
// (typically the fast decoding alone and its encoding/json baseline), side by side in the same
// run; each reports ns/op, MB/s of the body and allocations. It fails before measuring when parse or a decoder
// gives an error for a case, or parse routes it to no event type.
func BenchParse(b *testing.B, parse func(*http.Request, []byte) (forge.Event, error),
	cases []ParseBenchCase, decoders []ParseBenchDecoder) {
	b.Helper()
	for _, c := range cases {
		r := &http.Request{Method: http.MethodPost, Header: c.Header}
		if ev, err := parse(r, c.Body); err != nil || ev.Type == "" {
			b.Fatalf("%s: Parse gave %+v, %v", c.Name, ev, err)
		}
		benchBody(b, c.Name+"/Parse", c.Body, func() error { _, err := parse(r, c.Body); return err })
		for _, d := range decoders {
			if err := d.Decode(c.Body); err != nil {
				b.Fatalf("%s: %s refuses the body: %v", c.Name, d.Name, err)
			}
			benchBody(b, c.Name+"/"+d.Name, c.Body, func() error { return d.Decode(c.Body) })
		}
	}
}

// benchBody runs fn as the sub-benchmark name, with the throughput of body.
func benchBody(b *testing.B, name string, body []byte, fn func() error) {
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if err := fn(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
