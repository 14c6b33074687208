// Command alfred-script-agent is the entrypoint of the script agent image (see package
// github.com/alfred-bot/alfred/runner/agent/script for the script format). It reads
// /alfred/in/input.json and the script, plays the step for the run's key and attempt, and
// writes /alfred/out/result.json. Flags -script, -input, -workspace and -out override the paths.
package main

import (
	"os"

	"github.com/alfred-bot/alfred/runner/agent/script"
)

func main() {
	os.Exit(script.Play(os.Args[1:], os.Stdout, os.Stderr))
}
