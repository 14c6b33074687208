package apimode

import (
	"context"
	"time"
)

// SetWait replaces the agent's wait before a retry with f (tests see the waits without
// spending them).
func (a *Agent) SetWait(f func(ctx context.Context, d time.Duration) error) { a.wait = f }

// RetryAfter is retryAfter, for the tests.
var RetryAfter = retryAfter
