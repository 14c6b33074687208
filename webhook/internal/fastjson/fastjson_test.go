package fastjson

import (
	"errors"
	"testing"
)

// panicking panics when it is decoded, as a defect of the library would.
type panicking struct{}

func (*panicking) UnmarshalJSON([]byte) error { panic("decoder defect") }

// TestDecodeRecoversPanic checks that a panic raised while the library decodes is returned as a
// *PanicError instead of escaping.
func TestDecodeRecoversPanic(t *testing.T) {
	var v struct {
		X panicking `json:"x"`
	}
	err := Decode([]byte(`{"x":1}`), &v)
	var p *PanicError
	if !errors.As(err, &p) || p.Value != "decoder defect" {
		t.Fatalf("Decode returned %v, want the recovered panic", err)
	}
}

// TestDecode checks that Decode decodes as encoding/json does and reports what it refuses.
func TestDecode(t *testing.T) {
	var v struct {
		Name string `json:"name"`
		N    int64  `json:"n"`
	}
	if err := Decode([]byte(`{"NAME":"a","n":2,"other":[1,{}]}`), &v); err != nil || v.Name != "a" || v.N != 2 {
		t.Fatalf("Decode gave %+v, %v", v, err)
	}
	for _, body := range []string{`{"n":"2"}`, `{"n":1.5}`, `{"name":}`, `{"name":"a"} x`} {
		if err := Decode([]byte(body), &v); err == nil {
			t.Errorf("Decode accepted %s", body)
		}
	}
}
