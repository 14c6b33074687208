// Package fastjson is the fast path of the webhook parsers' JSON decoding: it decodes with
// github.com/goccy/go-json, a drop-in for encoding/json that reads a body in one pass (no
// separate validation pass, compiled decoders instead of reflection on every call). A parser
// uses it for payloads of the usual shape and decodes with encoding/json whatever it refuses,
// so the fast path only ever makes the common case cheaper; each parser's differential fuzz
// target holds the two libraries to the same value on every payload the fast one accepts.
package fastjson

import (
	"fmt"

	gojson "github.com/goccy/go-json"
)

// Decode decodes the JSON body into v (a non-nil pointer) with github.com/goccy/go-json, as
// encoding/json.Unmarshal would. A method of the values decoded is called as encoding/json
// calls it, except that a value with UnmarshalJSONFrom(*jsontext.Decoder) of
// github.com/goccy/go-json/jsontext is decoded by that method instead of UnmarshalJSON. Any
// error means "decode it with encoding/json instead": v may then hold part of the body. A panic
// of the library is recovered and returned as a *PanicError.
func Decode(body []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p}
		}
	}()
	return gojson.Unmarshal(body, v)
}

// PanicError is a panic of github.com/goccy/go-json that Decode recovered.
type PanicError struct {
	// Value is what the library panicked with.
	Value any
}

// Error says that the library panicked, and with what.
func (p *PanicError) Error() string {
	return fmt.Sprintf("fast JSON decoder panicked: %v", p.Value)
}
