package runner

import "testing"

// TestMilliCPUsRoundsUp: a Pod's CPU limit is never below runner.cpus, at the edges of a
// millicore.
func TestMilliCPUsRoundsUp(t *testing.T) {
	for _, c := range []struct {
		nano, milli int64
	}{
		{0, 0},
		{1, 1},
		{999_999, 1},
		{1_000_000, 1},
		{1_000_001, 2},
		{1e9, 1000},
		{1_500_000_000, 1500},
	} {
		if got := (Limits{NanoCPUs: c.nano}).MilliCPUs(); got != c.milli {
			t.Errorf("MilliCPUs(%d) = %d, want %d", c.nano, got, c.milli)
		}
	}
}
