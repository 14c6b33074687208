//go:build !linux

package webhook_test

import "time"

// processCPU reads nothing outside Linux (no /proc): the benchmark leaves the CPU figures out.
func processCPU() (self, postgres time.Duration, ok bool) { return 0, 0, false }

// peakRSS reads nothing outside Linux: the benchmark leaves the figure out.
func peakRSS() (mib float64, ok bool) { return 0, false }
