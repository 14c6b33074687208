// Command alfred-script-agent is the entrypoint of the script agent image (see package
// github.com/alfred-bot/alfred/runner/agent/script for the script format). It reads
// /alfred/in/input.json and the script, plays the step for the run's key and attempt, and
// writes /alfred/out/result.json. Flags -script, -input, -workspace and -out override the paths.
// SIGTERM ends it at once with code 143.
package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/alfred-bot/alfred/runner/agent/script"
)

func main() {
	// As a container's PID 1 the agent gets no default signal handling: stop at once on
	// SIGTERM (Alfred stopping the run), as a CLI would, instead of waiting for the SIGKILL.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		os.Exit(143)
	}()
	os.Exit(script.Play(os.Args[1:], os.Stdout, os.Stderr))
}
