// Command containedalfred is Alfred's runtime in a container of the Docker engine it starts runs
// on, as the compose file deploys it (runner.TestRedTeamEgressDockerContained). It finds its own
// container (docker.FindSelf), runs one development phase of the script agent with the egress
// allowlist through runner.Executor and docker.Runtime, and prints one JSON object on stdout:
// the container it found, the run's status and output, and the refusals the runtime reported.
//
// Its input is the environment variable CONTAINED_ALFRED, a JSON object: the script agent's
// image and script, the agent's provider (host:port, its EgressHosts), the names the proxy
// resolves (host:port → address:port, as the test's EgressDial), the data directory and
// worktree (host paths, mounted at the same paths), the installation's instance and the
// run's mailbox id. Like Alfred's pages in the compose file, it listens on port 8080 of every
// address of its container while the run goes on; the script's "ALFRED_ADDR" is replaced with
// its address on the network it was started on (the run dials it directly).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/egress"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Input is CONTAINED_ALFRED.
type Input struct {
	Image    string            `json:"image"`
	Script   string            `json:"script"`
	Provider string            `json:"provider"`
	Names    map[string]string `json:"names"`
	DataDir  string            `json:"data_dir"`
	Worktree string            `json:"worktree"`
	Instance string            `json:"instance"`
	Mailbox  int64             `json:"mailbox"`
	UID, GID int
}

// Output is what the program prints.
type Output struct {
	Self     string   `json:"self"`
	Addr     string   `json:"addr"` // its address on the network it was started on
	Status   string   `json:"status"`
	Err      string   `json:"err,omitempty"`
	Log      string   `json:"log"`
	Reported []string `json:"reported"`
}

// providerAgent is the script agent with a provider its runs must reach (runner.EgressAgent).
type providerAgent struct {
	*script.Agent
	provider string
}

func (p providerAgent) EgressHosts() []string { return []string{p.provider} }

func main() {
	out, err := run()
	if err != nil {
		out.Err = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func run() (Output, error) {
	var in Input
	if err := json.Unmarshal([]byte(os.Getenv("CONTAINED_ALFRED")), &in); err != nil {
		return Output{}, fmt.Errorf("CONTAINED_ALFRED: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt, cli, err := docker.NewFromEnv()
	if err != nil {
		return Output{}, err
	}
	defer cli.Close()
	var out Output
	if out.Self, err = docker.FindSelf(ctx, cli); err != nil {
		return out, err
	}
	if out.Self == "" {
		return out, fmt.Errorf("FindSelf: not in a container of this engine")
	}
	rt.SelfContainer = out.Self
	self, err := cli.ContainerInspect(ctx, out.Self)
	if err != nil {
		return out, err
	}
	for _, ep := range self.NetworkSettings.Networks {
		out.Addr = ep.IPAddress // the one network it was started on
	}
	ln, err := net.Listen("tcp", ":8080")
	if err != nil {
		return out, err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	in.Script = strings.ReplaceAll(in.Script, "ALFRED_ADDR", out.Addr)
	rt.EgressDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if real, ok := in.Names[addr]; ok {
			addr = real
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	var mu sync.Mutex
	rt.OnEgressRefused = func(labels map[string]string, target string) {
		mu.Lock()
		defer mu.Unlock()
		out.Reported = append(out.Reported, labels[runner.LabelPhase]+" "+target)
	}
	agent, err := script.NewFromBytes(in.Image, []byte(in.Script))
	if err != nil {
		return out, err
	}
	ex, err := runner.NewExecutor(runner.Config{
		Runtime: rt, Agents: map[string]runner.Agent{script.Name: providerAgent{Agent: agent, provider: in.Provider}},
		Bindings: map[phase.Phase]string{phase.Development: script.Name},
		DataDir:  in.DataDir, UID: in.UID, GID: in.GID,
		Limits:  runner.Limits{MemoryBytes: 256 << 20, NanoCPUs: 1e9, PIDs: 128},
		Timeout: 2 * time.Minute, StopGrace: time.Second, Instance: in.Instance,
		Egress: &runner.EgressPolicy{ProxyURL: egress.ProxyURL},
	})
	if err != nil {
		return out, err
	}
	res, err := ex.Run(ctx, runner.RunRequest{MailboxID: in.Mailbox, RunID: 1, Attempt: 1, Worktree: in.Worktree,
		Input: phase.Input{Phase: phase.Development, Repo: "acme/shop", Issue: 9}})
	if err != nil {
		return out, err
	}
	out.Status, out.Log = string(res.Status), res.Stdout+res.Stderr
	if res.CleanupErr != nil {
		return out, fmt.Errorf("cleanup: %w", res.CleanupErr)
	}
	return out, nil
}
