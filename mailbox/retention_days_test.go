package mailbox

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetentionDaysSaturate: a retention longer than a time.Duration holds is the longest
// duration, not a negative one that would purge what was closed an hour ago.
func TestRetentionDaysSaturate(t *testing.T) {
	t.Parallel()
	require.Equal(t, 30*24*time.Hour, daysDuration(30))
	require.Equal(t, time.Duration(math.MaxInt64), daysDuration(1_000_000))
	require.Positive(t, daysDuration(106_751))
}
