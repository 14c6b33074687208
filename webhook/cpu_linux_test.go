package webhook_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on
// every Linux architecture Go supports; proc(5)).
const clockTick = 100

// processCPU returns the CPU time (user plus system) used so far by this process (with its
// ended children: pgbench), by the process child and by the processes named postgres, from
// /proc; ok is false when /proc cannot be read. A PostgreSQL backend that has ended is counted
// in its postmaster's children's times (cutime, cstime), so the difference of two readings
// covers the connections of a pgbench run that ended between them.
func processCPU(child int) (self, childCPU, postgres time.Duration, ok bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	if len(stats) == 0 {
		return 0, 0, 0, false
	}
	me, other := strconv.Itoa(os.Getpid()), strconv.Itoa(child)
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, fields := s[open+1:end], strings.Fields(s[end+1:])
		if len(fields) < 15 {
			continue
		}
		// After the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
		var ticks int64
		for _, f := range fields[11:15] {
			n, _ := strconv.ParseInt(f, 10, 64)
			ticks += n
		}
		d := time.Duration(ticks) * time.Second / clockTick
		switch pid := filepath.Base(filepath.Dir(p)); {
		case pid == me:
			self = d
		case pid == other:
			childCPU = d
		case comm == "postgres":
			postgres += d
		}
	}
	return self, childCPU, postgres, true
}

// procStatusMiB returns the field key of /proc/<pid>/status, in kB there (VmRSS: the resident
// set now; VmHWM: its peak), in MiB; ok is false when it cannot be read.
func procStatusMiB(pid int, key string) (mib float64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, found := strings.CutPrefix(line, key+":"); found {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}
