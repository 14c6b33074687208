// Command egressgate is the egress gate alone (runner/kubernetes/egressgate.Main): the tests
// run it as the gate image of their run Pods in place of Alfred's whole binary, which is the
// same code in a far larger image. Its arguments are a Pod's: "egress-gate -target host:port
// -timeout 60s".
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/alfred-bot/alfred/runner/kubernetes/egressgate"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 || args[0] != egressgate.Subcommand {
		fmt.Fprintf(os.Stderr, "usage: %s %s [-target host:port] [-timeout 60s]\n", os.Args[0], egressgate.Subcommand)
		os.Exit(2)
	}
	if err := egressgate.Main(context.Background(), args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
