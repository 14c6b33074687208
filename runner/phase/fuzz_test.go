package phase

import "testing"

// FuzzDecodeResult: any bytes an agent writes as its result decode or fail, never panic; a
// decoded result that validates validates again (validation is deterministic).
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{`{"summary":"ok","plan":"1. x"}`, `{"summary":"ok","questions":[{"id":"q1","title":"t","default":"a","options":[{"id":"a","label":"A"}]}]}`,
		`{}`, `null`, `[]`, `{"summary":"\u0000"}`, `{"files":{"../x":"y"}}`, "\xff"} {
		f.Add([]byte(s))
	}
	inputs := []Input{{Phase: Analysis, Step: StepFunctional, Key: "analysis.functional"},
		{Phase: Analysis, Step: StepTechnical, Key: "analysis.technical"}, {Phase: Development, Key: "development"},
		{Phase: Answer, Key: "answer"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range inputs {
			r, err := DecodeResult(in, data)
			if err != nil || r == nil {
				continue
			}
			if ValidateResult(in, r) == nil && ValidateResult(in, r) != nil {
				t.Fatal("validation is not deterministic")
			}
		}
	})
}
