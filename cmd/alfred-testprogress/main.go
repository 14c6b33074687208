// Command alfred-testprogress prints the progress of `go test -json` as it happens, for
// `make test`: a line per package as soon as it ends (go test's own text output holds every
// package back until the ones before it in import-path order are done, so one slow package,
// cmd/alfred, hides all the others), the whole output of a package that fails, and every
// interval the packages still running with their elapsed time. It exits 1 when a package or a
// build failed, 0 otherwise.
//
//	go test -json ./... | alfred-testprogress [-every 1m]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	every := flag.Duration("every", time.Minute, "how often to list the packages still running")
	flag.Parse()
	p := newProgress(os.Stdout, time.Now)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.running()
			}
		}
	}()
	err := p.read(os.Stdin)
	close(stop)
	wg.Wait()
	if err != nil {
		fmt.Fprintln(os.Stderr, "alfred-testprogress:", err)
		os.Exit(1)
	}
	if !p.summary() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Elapsed    float64
	Output     string
}

// progress follows the packages of one `go test -json` stream.
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	now     func() time.Time
	started map[string]time.Time
	output  map[string][]string // a running package's output, printed if it fails
	failed  []string
	passed  int
	// Top-level tests by their end: passed, failed, skipped (subtests are not counted).
	tests struct{ passed, failed, skipped int }
}

func newProgress(out io.Writer, now func() time.Time) *progress {
	return &progress{out: out, now: now, started: map[string]time.Time{}, output: map[string][]string{}}
}

// read consumes the stream until it ends. A line that is not an event is printed as it is
// (a build error before Go 1.24, a panic of go itself).
func (p *progress) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			p.print(sc.Text())
			continue
		}
		p.event(ev)
	}
	return sc.Err()
}

func (p *progress) print(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.out, line)
}

// event handles one event: a package's start, output and end, a build's output and failure.
func (p *progress) event(ev event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case ev.Action == "build-output":
		fmt.Fprint(p.out, ev.Output)
	case ev.Action == "build-fail":
		p.failed = append(p.failed, ev.ImportPath+" (build)")
	case ev.Test != "":
		switch {
		case ev.Action == "output":
			p.output[ev.Package] = append(p.output[ev.Package], ev.Output)
		case strings.Contains(ev.Test, "/"): // a subtest: its parent counts
		case ev.Action == "pass":
			p.tests.passed++
		case ev.Action == "fail":
			p.tests.failed++
		case ev.Action == "skip":
			p.tests.skipped++
		}
	case ev.Action == "start":
		p.started[ev.Package] = p.now()
	case ev.Action == "output":
		p.output[ev.Package] = append(p.output[ev.Package], ev.Output)
	case ev.Action == "skip": // no test files
		p.passed++
		p.end(ev.Package)
	case ev.Action == "pass":
		p.passed++
		fmt.Fprintf(p.out, "ok    %s %s\n", ev.Package, seconds(ev.Elapsed))
		p.end(ev.Package)
	case ev.Action == "fail":
		fmt.Fprintf(p.out, "--- output of %s:\n%s", ev.Package, strings.Join(p.output[ev.Package], ""))
		fmt.Fprintf(p.out, "FAIL  %s %s\n", ev.Package, seconds(ev.Elapsed))
		p.failed = append(p.failed, ev.Package)
		p.end(ev.Package)
	}
}

func (p *progress) end(pkg string) {
	delete(p.started, pkg)
	delete(p.output, pkg)
}

// running prints the packages still running, the longest first.
func (p *progress) running() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.started) == 0 {
		return
	}
	type run struct {
		pkg string
		d   time.Duration
	}
	var runs []run
	for pkg, t := range p.started {
		runs = append(runs, run{pkg, p.now().Sub(t)})
	}
	slices.SortFunc(runs, func(a, b run) int { return int(b.d - a.d) })
	var parts []string
	for _, r := range runs {
		parts = append(parts, fmt.Sprintf("%s (%s)", r.pkg, r.d.Round(time.Second)))
	}
	fmt.Fprintf(p.out, "...   running: %s; %d done\n", strings.Join(parts, ", "), p.passed+len(p.failed))
}

// summary prints the failures and the closing line "tests: N passed, N failed, N skipped"
// (top-level tests), and reports whether everything passed.
func (p *progress) summary() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer fmt.Fprintf(p.out, "tests: %d passed, %d failed, %d skipped\n", p.tests.passed, p.tests.failed, p.tests.skipped)
	if len(p.failed) == 0 && p.passed == 0 {
		fmt.Fprintln(p.out, "FAILED: no package ran (go test's own message is above)")
		return false
	}
	if len(p.failed) == 0 {
		fmt.Fprintf(p.out, "all %d packages passed\n", p.passed)
		return true
	}
	fmt.Fprintf(p.out, "FAILED: %s\n", strings.Join(p.failed, ", "))
	return false
}

func seconds(s float64) string {
	return (time.Duration(s*1000) * time.Millisecond).Round(10 * time.Millisecond).String()
}
