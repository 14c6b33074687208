package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/egress"
	"github.com/alfred-bot/alfred/runner/phase"
)

// sessionScript is the script adapter declaring Claude Code's session layout, so that Compile
// mounts a session directory behind a configuration root.
type sessionScript struct{ *script.Agent }

func (sessionScript) Capabilities() runner.Capabilities {
	return runner.Capabilities{ResumableSessions: true, SessionStatePath: runner.HomeDir + "/.claude/projects/-workspace",
		CallerChosenID: true}
}
func (sessionScript) ParseVersion(string) (string, error) { return "1.0.0", nil }
func (sessionScript) ResumeVerified(string) bool          { return true }

var compileConfig = runner.CompileConfig{DataDir: "/data", UID: 65532, GID: 65532,
	Limits: runner.Limits{MemoryBytes: 2 << 30, NanoCPUs: 2e9, PIDs: 512, Timeout: 1800e9}, Instance: "0123456789ab"}

// compiledView is the golden form of a Compiled: the files as text.
type compiledView struct {
	Name     string               `json:"name"`
	Spec     runner.ContainerSpec `json:"spec"`
	Files    map[string]string    `json:"files"`
	HomeDirs string               `json:"home_dirs,omitempty"`
}

// TestCompileGolden: the container spec of an analysis (read-only workspace; every root
// filesystem is read-only, see runtimetest's RootfsReadOnlyTmpAndHomeWritable), a development
// run (read-write workspace) and a development run with a session mount behind its
// configuration root. Compile touches no file: the paths exist nowhere.
func TestCompileGolden(t *testing.T) {
	t.Parallel()
	agent, err := script.NewFromBytes("alfred/script-agent:test", []byte(fakeScript))
	require.NoError(t, err)
	base := runner.RunRequest{MailboxID: 12, RunID: 34, Attempt: 2, Worktree: "/data/worktrees/alfred-mbx12-r34"}
	withInput := func(r runner.RunRequest, in phase.Input) runner.RunRequest { r.Input = in; return r }
	claude, err := claudecode.New(claudecode.Config{Image: "alfred/claude-code:test", APIKey: "sk-ant-test"})
	require.NoError(t, err)
	egressCfg := compileConfig
	egressCfg.Egress = &runner.EgressPolicy{Allow: []string{"registry.npmjs.org:443", "API.anthropic.com:443", "127.0.0.1:11434"},
		ProxyURL: egress.ProxyURL}
	cases := map[string]struct {
		req   runner.RunRequest
		agent runner.Agent
		cfg   *runner.CompileConfig
	}{
		"analysis": {withInput(base, phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional, Repo: "group/repo",
			Issue: 7, Title: "Add x"}), agent, nil},
		"development": {withInput(base, phase.Input{Phase: phase.Development, Repo: "group/repo", Issue: 7,
			Title: "Add x", Branch: "alfred/7-add-x"}), agent, nil},
		"development_session": {func() runner.RunRequest {
			r := withInput(base, phase.Input{Phase: phase.Development, Repo: "group/repo", Issue: 7, Title: "Add x",
				Branch: "alfred/7-add-x", SessionName: "alfred/7-add-x", SessionID: "44444444-2222-4333-8444-555555555555",
				Resume: true})
			r.SessionDir = "/data/sessions/12/claude-main"
			return r
		}(), sessionScript{agent}, nil},
		// The egress allowlist: the adapter's provider first, then the operator's hosts (a
		// duplicate in another case dropped), and the proxy's environment.
		"development_egress": {withInput(base, phase.Input{Phase: phase.Development, Repo: "group/repo", Issue: 7,
			Title: "Add x", Branch: "alfred/7-add-x"}), claude, &egressCfg},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := compileConfig
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			c, err := runner.Compile(cfg, tc.req, tc.agent)
			require.NoError(t, err)
			require.NoDirExists(t, compileConfig.RunDir(c.Name), "Compile creates nothing")
			v := compiledView{Name: c.Name, Spec: c.Spec, Files: map[string]string{}, HomeDirs: c.HomeDirs}
			for n, b := range c.Files {
				v.Files[n] = string(b)
			}
			got, err := json.MarshalIndent(v, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			golden := filepath.Join("testdata", "compile_"+name+".golden.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

// TestCompileRejects: the request errors Compile reports before anything runs.
func TestCompileRejects(t *testing.T) {
	t.Parallel()
	agent, err := script.NewFromBytes("alfred/script-agent:test", []byte(fakeScript))
	require.NoError(t, err)
	in := phase.Input{Phase: phase.Answer}
	for name, req := range map[string]runner.RunRequest{
		"no attempt":        {Worktree: "/wt", Input: in},
		"no phase":          {Attempt: 1, Worktree: "/wt"},
		"relative worktree": {Attempt: 1, Worktree: "wt", Input: in},
	} {
		_, err := runner.Compile(compileConfig, req, agent)
		require.Error(t, err, name)
	}
	hostEgress := compileConfig
	hostEgress.HostNetwork, hostEgress.Egress = true, &runner.EgressPolicy{}
	_, err = runner.Compile(hostEgress, runner.RunRequest{Attempt: 1, Worktree: "/wt", Input: in}, agent)
	require.ErrorContains(t, err, "host network", "the host's network is outside every egress allowlist")
}

// TestInstanceID: one data directory is one installation whatever the spelling of its path;
// another directory is another installation, and the id fits a container name.
func TestInstanceID(t *testing.T) {
	dir := t.TempDir()
	id := runner.InstanceID(dir)
	require.Regexp(t, `^[0-9a-f]{12}$`, id)
	require.Equal(t, id, runner.InstanceID(filepath.Join(dir, "sub", "..")), "a cleaned path is the same installation")
	require.NotEqual(t, id, runner.InstanceID(t.TempDir()))
}
