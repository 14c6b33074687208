package cost

import "testing"

func TestWords(t *testing.T) {
	for _, c := range []struct {
		usd     float64
		unrated int
		want    string
	}{
		{0, 0, "$0.0000"},
		{0.0123, 0, "$0.0123"},
		{0, 1, "1 unrated run"},
		{0, 2, "2 unrated runs"},
		{0.0123, 1, "$0.0123 + 1 unrated run"},
		{0.42, 3, "$0.4200 + 3 unrated runs"},
	} {
		if got := Words(c.usd, c.unrated); got != c.want {
			t.Errorf("Words(%v, %d) = %q, want %q", c.usd, c.unrated, got, c.want)
		}
	}
}
