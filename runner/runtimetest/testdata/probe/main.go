// Command probe is the entrypoint of the runtime conformance image (runtimetest.BuildImage).
// Usage: probe <subcommand> [args]:
//
//	exit N              exit with code N
//	print OUT [ERR]     write OUT to stdout and ERR to stderr (each with a newline)
//	sleep SECONDS       sleep, dying on SIGTERM as usual
//	sleep-ignore-term S sleep S seconds ignoring SIGTERM (only SIGKILL ends it early)
//	try-write PATH      create PATH; print "ok" (exit 0) or "denied: <err>" (exit 1)
//	uid                 print "uid:gid"
//	status              print the CapEff and NoNewPrivs lines of /proc/self/status
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe <exit|print|sleep|sleep-ignore-term|try-write|uid|status> [args]")
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
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand", os.Args[1])
		os.Exit(2)
	}
}
