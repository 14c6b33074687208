package script

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// RedTeamNet holds the script keys that do what a prompt-injected agent would with the network,
// the environment and Alfred's files (spec/security.md). Each attempt prints one line on stdout
// saying what it tried and what happened, so a test reads the outcome from the run's log:
//
//	development:
//	  connect: ["https://api.example:443/", "http://off-list.example/"]  # GET through the proxy env
//	  dial: ["203.0.113.7:443"]                 # a raw TCP connection, ignoring any proxy
//	  print_env: true                           # every variable, as `env` prints it
//	  read_files: ["/etc/alfred/alfred.yaml"]   # paths outside the run's mounts
//	  write_env: {leak.txt: ANTHROPIC_API_KEY}  # the variable's value into a workspace file
//
// Lines: "connect <url>: <status>" or "connect <url>: error: …"; "dial <addr>: connected" or
// "dial <addr>: error: …"; "env <NAME>=<value>"; "read <path>: <n> bytes: <content>" or
// "read <path>: error: …"; "wrote <path> from $<NAME>".
type RedTeamNet struct {
	// Connect are URLs fetched with an HTTP client that honours HTTP_PROXY and HTTPS_PROXY, as
	// the agents' CLIs do.
	Connect []string `json:"connect,omitempty"`
	// Dial are host:port pairs connected to directly (no proxy): what a tool that ignores the
	// proxy variables does.
	Dial []string `json:"dial,omitempty"`
	// PrintEnv prints the whole environment.
	PrintEnv bool `json:"print_env,omitempty"`
	// ReadFiles are absolute paths read and printed (outside the mounts: Alfred's files).
	ReadFiles []string `json:"read_files,omitempty"`
	// WriteEnv maps a workspace path (relative, as Files) to a variable whose value is written
	// there, so that it would be committed.
	WriteEnv map[string]string `json:"write_env,omitempty"`
}

// redTeamTimeout bounds each connection attempt: an address the network drops must cost the
// run seconds, not the run's whole limit.
const redTeamTimeout = 5 * time.Second

// playRedTeamNet plays the step's red-team keys; it reports whether every write_env file was
// written (the network and read attempts only report).
func (st *Step) playRedTeamNet(workspace string, stdout, stderr io.Writer) bool {
	if st.PrintEnv {
		env := os.Environ()
		slices.Sort(env)
		for _, kv := range env {
			fmt.Fprintf(stdout, "env %s\n", kv)
		}
	}
	for _, p := range st.ReadFiles {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(stdout, "read %s: error: %v\n", p, err)
			continue
		}
		fmt.Fprintf(stdout, "read %s: %d bytes: %s\n", p, len(b), strings.ReplaceAll(string(b), "\n", `\n`))
	}
	client := &http.Client{Timeout: redTeamTimeout,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: redTeamTimeout}}
	for _, u := range st.Connect {
		resp, err := client.Get(u)
		if err != nil {
			fmt.Fprintf(stdout, "connect %s: error: %v\n", u, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		fmt.Fprintf(stdout, "connect %s: %s: %s\n", u, resp.Status, strings.TrimSpace(string(body)))
	}
	for _, a := range st.Dial {
		c, err := net.DialTimeout("tcp", a, redTeamTimeout)
		if err != nil {
			fmt.Fprintf(stdout, "dial %s: error: %v\n", a, err)
			continue
		}
		c.Close()
		fmt.Fprintf(stdout, "dial %s: connected\n", a)
	}
	ok := true
	for p, name := range st.WriteEnv {
		clean, err := CleanPath(p)
		if err == nil {
			err = os.WriteFile(filepath.Join(workspace, filepath.FromSlash(clean)), []byte(os.Getenv(name)+"\n"), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "alfred-script-agent: write %s: %v\n", p, err)
			ok = false
			continue
		}
		fmt.Fprintf(stdout, "wrote %s from $%s\n", clean, name)
	}
	return ok
}
