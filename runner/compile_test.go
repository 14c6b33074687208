package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
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
	cases := map[string]struct {
		req   runner.RunRequest
		agent runner.Agent
	}{
		"analysis": {withInput(base, phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional, Repo: "group/repo",
			Issue: 7, Title: "Add x"}), agent},
		"development": {withInput(base, phase.Input{Phase: phase.Development, Repo: "group/repo", Issue: 7,
			Title: "Add x", Branch: "alfred/7-add-x"}), agent},
		"development_session": {func() runner.RunRequest {
			r := withInput(base, phase.Input{Phase: phase.Development, Repo: "group/repo", Issue: 7, Title: "Add x",
				Branch: "alfred/7-add-x", SessionName: "alfred/7-add-x", SessionID: "44444444-2222-4333-8444-555555555555",
				Resume: true})
			r.SessionDir = "/data/sessions/12/claude-main"
			return r
		}(), sessionScript{agent}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := runner.Compile(compileConfig, tc.req, tc.agent)
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
}
