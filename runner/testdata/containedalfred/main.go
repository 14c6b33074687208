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
// run's mailbox id.
//
// It then starts a second run (this image, "sleep": a run that goes on) and exits without
// tearing it down, as an Alfred that stops; Input.State marks that. Started again (its
// container restarted, still on that run's network), it adopts the run (docker.Runtime.Adopt
// serves its proxy again), asks the proxy for the host off the list (Output.Adopted: the status)
// and destroys the run (Output.Cleanup: its error).
//
// Like Alfred's pages in the compose file, it listens on port 8080 of every
// address of its container while the run goes on; the script's "ALFRED_ADDR" is replaced with
// its address on the network it was started on (the run dials it directly).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

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
	State    string            `json:"state"` // a file: present once the first start is over
	OffURL   string            `json:"off_url"`
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
	Adopted  string   `json:"adopted,omitempty"` // after the restart: the proxy's answer for OffURL
	Cleanup  string   `json:"cleanup,omitempty"` // after the restart: Destroy's error
}

// leftName is the run left running by the first start.
const leftName = "left"

// providerAgent is the script agent with a provider its runs must reach (runner.EgressAgent).
type providerAgent struct {
	*script.Agent
	provider string
}

func (p providerAgent) EgressHosts() []string { return []string{p.provider} }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sleep" {
		time.Sleep(10 * time.Minute) // a run that goes on while Alfred restarts
		return
	}
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
	rt.OnEgressRefused = func(labels map[string]string, target string, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		out.Reported = append(out.Reported, labels[runner.LabelPhase]+" "+target)
	}
	if _, err := os.Stat(in.State); err == nil {
		err := adopt(ctx, rt, cli, in, &out)
		mu.Lock()
		defer mu.Unlock()
		return out, err
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
	// A run left going, as by an Alfred that stops.
	self, err = cli.ContainerInspect(ctx, out.Self)
	if err != nil {
		return out, err
	}
	_, err = rt.Start(ctx, runner.ContainerSpec{Name: leftRun(in), Image: self.Config.Image, Cmd: []string{"sleep"},
		User: fmt.Sprintf("%d:%d", in.UID, in.GID), Egress: &runner.Egress{},
		Labels: map[string]string{runner.LabelManaged: "true", runner.LabelInstance: in.Instance, runner.LabelPhase: "development"}})
	if err != nil {
		return out, err
	}
	return out, os.WriteFile(in.State, nil, 0o644)
}

// leftRun is the name of the run the first start leaves going.
func leftRun(in Input) string { return "alfred-" + in.Instance + "-" + leftName }

// adopt is the second start: adopt the run left going, ask its proxy for OffURL, destroy it.
func adopt(ctx context.Context, rt *docker.Runtime, cli *client.Client, in Input, out *Output) error {
	h, err := rt.Adopt(ctx, leftRun(in))
	if err != nil {
		return err
	}
	info, err := cli.ContainerInspect(ctx, string(h.ID))
	if err != nil {
		return err
	}
	var proxyAddr string
	for _, ep := range info.NetworkSettings.Networks {
		if a, err := netip.ParseAddr(ep.IPAddress); err == nil {
			proxyAddr = docker.SelfAddress(netip.PrefixFrom(a, ep.IPPrefixLen)).String()
		}
	}
	proxy, _ := url.Parse("http://" + net.JoinHostPort(proxyAddr, strconv.Itoa(egress.Port)))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	if resp, err := client.Get(in.OffURL); err != nil {
		out.Adopted = "error: " + err.Error()
	} else {
		resp.Body.Close()
		out.Adopted = resp.Status
	}
	if err := rt.Destroy(ctx, h.ID); err != nil {
		out.Cleanup = err.Error()
	}
	return nil
}
