//go:build !linux

package webhook_test

import "time"

// processCPU reads nothing outside Linux (no /proc): the benchmark leaves the CPU figures out.
func processCPU(child int) (self, childCPU, postgres time.Duration, ok bool) { return 0, 0, 0, false }

// procStatusMiB reads nothing outside Linux: the benchmark leaves the resident set out.
func procStatusMiB(pid int, key string) (mib float64, ok bool) { return 0, false }
