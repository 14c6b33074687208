// Command probe is the entrypoint of the runtime conformance image (runtimetest.BuildImage).
// Usage: probe <subcommand> [args]:
//
//	exit N              exit with code N
//	print OUT [ERR]     write OUT to stdout and ERR to stderr (each with a newline)
//	flood FIRST BYTES   write the line FIRST to stdout, then BYTES of filler lines
//	sleep SECONDS       sleep, dying on SIGTERM as usual
//	sleep-ignore-term S sleep S seconds ignoring SIGTERM (only SIGKILL ends it early)
//	try-write PATH      create PATH; print "ok" (exit 0) or "denied: <err>" (exit 1)
//	uid                 print "uid:gid"
//	status              print the CapEff and NoNewPrivs lines of /proc/self/status
//	egress ON OFF       the egress check of a run under a NetworkPolicy (host:port each): dial
//	                    OFF until a dial fails (the policy is in force; at most 300 tries, 200 ms
//	                    apart), then print "on <addr>: <HTTP status>" for a GET of ON and
//	                    "off <addr>: refused: <err>" or "off <addr>: connected" for OFF
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe <exit|print|flood|sleep|sleep-ignore-term|try-write|uid|status> [args]")
		os.Exit(2)
	}
	arg := func(i int) string {
		if len(os.Args) > i {
			return os.Args[i]
		}
		return ""
	}
	switch os.Args[1] {
	case "exit":
		n, _ := strconv.Atoi(arg(2))
		os.Exit(n)
	case "print":
		fmt.Fprintln(os.Stdout, arg(2))
		if arg(3) != "" {
			fmt.Fprintln(os.Stderr, arg(3))
		}
	case "flood": // flood <first line> <bytes>: the line, then that many bytes of filler lines
		fmt.Fprintln(os.Stdout, arg(2))
		n, _ := strconv.Atoi(arg(3))
		w := bufio.NewWriter(os.Stdout)
		for line := strings.Repeat("flood ", 16) + "\n"; n > 0; n -= len(line) {
			_, _ = w.WriteString(line)
		}
		_ = w.Flush()
	case "sleep":
		d, _ := strconv.ParseFloat(arg(2), 64)
		time.Sleep(time.Duration(d * float64(time.Second)))
	case "sleep-ignore-term":
		signal.Ignore(syscall.SIGTERM)
		d, _ := strconv.ParseFloat(arg(2), 64)
		time.Sleep(time.Duration(d * float64(time.Second)))
	case "try-write":
		if err := os.WriteFile(arg(2), []byte("probe\n"), 0o644); err != nil {
			fmt.Println("denied:", err)
			os.Exit(1)
		}
		fmt.Println("ok")
	case "uid":
		fmt.Printf("%d:%d\n", os.Getuid(), os.Getgid())
	case "status":
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "NoNewPrivs:") {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	case "egress":
		egress(arg(2), arg(3))
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand", os.Args[1])
		os.Exit(2)
	}
}

// egress waits until a connection to off fails (the policy may reach the node after the
// container starts), then reports a GET of on and one more connection to off.
func egress(on, off string) {
	dial := func() error {
		c, err := net.DialTimeout("tcp", off, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	for i := 0; i < 300 && dial() == nil; i++ {
		time.Sleep(200 * time.Millisecond)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if resp, err := client.Get("http://" + on + "/"); err != nil {
		fmt.Printf("on %s: error: %v\n", on, err)
	} else {
		resp.Body.Close()
		fmt.Printf("on %s: %s\n", on, resp.Status)
	}
	if err := dial(); err != nil {
		fmt.Printf("off %s: refused: %v\n", off, err)
	} else {
		fmt.Printf("off %s: connected\n", off)
	}
}
