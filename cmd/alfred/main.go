// Command alfred is the Alfred bot: one binary with subcommands.
//
//	alfred serve          [--config alfred.yaml]   run the webhook server and the workers
//	alfred migrate        [--config alfred.yaml]   apply the database migrations
//	alfred rebuild        [--config alfred.yaml]   rebuild the mailboxes the store lacks from
//	                                               what Alfred left on the forges
//	alfred config check   [--config alfred.yaml] [--project owner/name]
//	                                               load, validate and print the configuration and
//	                                               the settings in force for a project
//	alfred doctor         [--config alfred.yaml]   check everything Alfred needs, print the fixes
//	alfred replay --url URL --secret-file F [--kind forgejo|gitlab] [--keep-delivery] FIXTURE.json
//	                                               sign a captured webhook and POST it
//	alfred demo           [--dir alfred-demo]      try Alfred with no forge: a stand-in Forgejo,
//	                                               one issue played to a merged pull request
//	alfred demo answer q1 b | alfred demo validate act as the demo's human
//	alfred version                                 print the version
//	alfred egress-gate [-target host:port] [-timeout 60s]
//	                                               (in a run's Pod on Kubernetes) wait until the
//	                                               runs' NetworkPolicy filters the Pod
//
// --config defaults to $ALFRED_CONFIG, else alfred.yaml. The configuration and its ALFRED_*
// environment variables are described in package github.com/alfred-bot/alfred/internal/config.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/internal/config"
)

const usage = `usage: alfred <command> [flags]

commands:
  serve          run the webhook server and the workers
  migrate        apply the database migrations
  rebuild        rebuild the mailboxes of open issues the store lacks from what Alfred left on the forges
  config check   load, validate and print the effective configuration (secrets redacted)
  doctor         check the configuration, database, Docker, agent images and forges; print the fixes
  replay         sign a captured webhook fixture and POST it to a running Alfred
  demo           try Alfred with no forge: a stand-in Forgejo on this machine, one issue to a merged pull request
  version        print the version

Run "alfred <command> -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage reports a command line that could not be understood; its details were printed.
var errUsage = errors.New("usage")

// app is what every subcommand may use: the output streams, the environment and the censor
// of the configuration loaded so far (for error messages; nil before one is loaded).
type app struct {
	stdout, stderr io.Writer
	environ        []string
	censor         *censor.Censor
}

// run executes the command line args (without the program name) and returns the exit code:
// 0 on success, 1 on failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, environ: os.Environ()}
	err := a.dispatch(ctx, args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, "alfred:", a.censor.String(err.Error()))
		return 1
	}
}

// dispatch runs the subcommand named by args[0].
func (a *app) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, a, rest)
	case "migrate":
		return a.migrate(ctx, rest)
	case "rebuild":
		return a.rebuild(ctx, rest)
	case "config":
		if len(rest) == 0 || rest[0] != "check" {
			fmt.Fprintln(a.stderr, "usage: alfred config check [--config alfred.yaml] [--project owner/name]")
			return errUsage
		}
		return a.configCheck(rest[1:])
	case "replay":
		return a.replay(ctx, rest)
	case "doctor":
		return a.doctor(ctx, rest)
	case "demo":
		return a.demoCommand(ctx, rest)
	case "version":
		fmt.Fprintln(a.stdout, "alfred", versionString())
		return nil
	case "egress-gate":
		return a.egressGate(ctx, rest)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(a.stdout, usage)
		return nil
	}
	fmt.Fprintf(a.stderr, "alfred: unknown command %q\n\n%s", cmd, usage)
	return errUsage
}

// flagSet returns a FlagSet for a subcommand that reports to stderr instead of exiting.
func (a *app) flagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("alfred "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "usage: alfred %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args into fs, allowing flags after positional arguments, and returns the
// positional ones. A parse error is errUsage (flag has printed it); -h is flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// configFlag registers --config on fs.
func (a *app) configFlag(fs *flag.FlagSet) *string {
	def := cmp.Or(a.getenv("ALFRED_CONFIG"), config.DefaultPath)
	return fs.String("config", def, "configuration file (env ALFRED_CONFIG)")
}

// getenv looks key up in the app's environment.
func (a *app) getenv(key string) string {
	for _, kv := range slices.Backward(a.environ) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// loadConfig loads the configuration and keeps its censor for error messages. The config package
// never puts a secret in an error; the censor guards what third-party errors (database driver,
// HTTP) might echo.
func (a *app) loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path, a.environ)
	if err != nil {
		return nil, err
	}
	a.censor = cfg.Censor()
	return cfg, nil
}

// configOnly parses the flags of a command that takes only --config, and loads the
// configuration. It returns the configuration and its path.
func (a *app) configOnly(name string, args []string) (*config.Config, string, error) {
	fs := a.flagSet(name, "[--config alfred.yaml]")
	path := a.configFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return nil, "", err
	}
	if len(pos) > 0 {
		fs.Usage()
		return nil, "", errUsage
	}
	cfg, err := a.loadConfig(*path)
	return cfg, *path, err
}

// configCheck implements "alfred config check": the effective configuration, secrets
// redacted, then the scoped settings in force for --project (or globally) and where each came
// from.
func (a *app) configCheck(args []string) error {
	fs := a.flagSet("config check", "[--config alfred.yaml] [--project owner/name]")
	path := a.configFlag(fs)
	project := fs.String("project", "", "print the settings in force for this project (owner/name, a GitLab path)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fs.Usage()
		return errUsage
	}
	cfg, err := a.loadConfig(*path)
	if err != nil {
		return err
	}
	if _, err := buildAgents(cfg); err != nil {
		return err
	}
	dump := cfg.Dump()
	fmt.Fprint(a.stdout, dump)
	if !strings.HasSuffix(dump, "\n") {
		fmt.Fprintln(a.stdout)
	}
	scope := "global"
	if *project != "" {
		scope = "project " + *project
	}
	fmt.Fprintf(a.stdout, "\n# settings in force (%s)\n", scope)
	for _, l := range cfg.For(*project).Lines() {
		fmt.Fprintln(a.stdout, "# "+l)
	}
	fmt.Fprintf(a.stderr, "%s: OK\n", *path)
	return nil
}
