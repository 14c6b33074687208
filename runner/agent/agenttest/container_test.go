package agenttest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/agent/codex"
	"github.com/alfred-bot/alfred/runner/agent/copilot"
	"github.com/alfred-bot/alfred/runner/agent/gemini"
	"github.com/alfred-bot/alfred/runner/agent/opencode"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// adapters returns the five adapters on image, with fake keys.
func adapters(t *testing.T, image string) []runner.SessionAgent {
	t.Helper()
	cc, err := claudecode.New(claudecode.Config{Image: image, APIKey: "sk-ant-standin-key"})
	require.NoError(t, err)
	cx, err := codex.New(codex.Config{Image: image, APIKey: "sk-codex-standin-key"})
	require.NoError(t, err)
	oc, err := opencode.New(opencode.Config{Image: image, APIKey: "sk-opencode-standin-key", Model: "anthropic/claude-sonnet-4-5"})
	require.NoError(t, err)
	cp, err := copilot.New(copilot.Config{Image: image, APIKey: "github_pat_standin_token_0123456789"})
	require.NoError(t, err)
	gm, err := gemini.New(gemini.Config{Image: image, APIKey: "AIza-standin-key"})
	require.NoError(t, err)
	return []runner.SessionAgent{cc, cx, oc, cp, gm}
}

// unknownID is a well-formed session id that names no session.
func unknownID(a runner.SessionAgent) string {
	if a.Name() == opencode.Name {
		return "ses_00000000000000000000000000"
	}
	return uuid.NewString()
}

// TestContainerSessions runs every adapter against the stand-in in real containers through
// runner/docker: run 1 starts a session (caller-chosen id or read from the stream), run 2
// resumes it by id with the session directory mounted from the host at SessionStatePath and
// must see run 1's MARK token (the history went back to the "model"); resuming an unknown id
// is recognised as runner.ErrSessionNotFound, from stderr and from stdout and the exit code
// alone.
func TestContainerSessions(t *testing.T) {
	cli := runtimetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel) // the parallel subtests run after this function returns
	image := agenttest.BuildImageOnce(t, ctx, cli)
	rt := docker.New(cli)

	for _, a := range adapters(t, image) {
		t.Run(a.Name(), func(t *testing.T) {
			t.Parallel()
			caps := a.Capabilities()
			require.True(t, caps.ResumableSessions)
			worktree, sessions := agenttest.HostDir(t), agenttest.HostDir(t)

			// Version detection through the image.
			out := agenttest.Run(t, ctx, rt, agenttest.Spec{Agent: versionAgent{a}, Input: phase.Input{Phase: phase.Review}, Worktree: worktree})
			require.Zero(t, out.Exit.Code, string(out.Stderr))
			v, err := a.ParseVersion(string(out.Stdout))
			require.NoError(t, err)
			require.True(t, a.ResumeVerified(v), "stand-in reports a version spec/agents.md lists as tested: %s", v)

			// Run 1: fresh session.
			in1 := phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional, Key: "analysis.functional", Attempt: 1,
				Repo: "group/app", Issue: 7, Title: "Remember MARK-ALPHA", Description: "First run.", SessionName: "agent/issue-7-remember"}
			if caps.CallerChosenID {
				in1.SessionID = uuid.NewString()
			}
			o1 := agenttest.Run(t, ctx, rt, agenttest.Spec{Agent: a, Input: in1, Worktree: worktree, SessionDir: sessions})
			logTraps(t, o1)
			r1, err := o1.Result(a, in1)
			require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", o1.Stdout, o1.Stderr)
			require.NotEmpty(t, r1.SessionID)
			if caps.CallerChosenID {
				require.Equal(t, in1.SessionID, r1.SessionID)
			}
			require.Contains(t, r1.Summary, "MARK-ALPHA")
			require.NotEmpty(t, r1.Understanding)
			entries, err := os.ReadDir(sessions)
			require.NoError(t, err)
			require.NotEmpty(t, entries, "the session landed in the mounted state dir")

			// Run 2: resume by exact id; development phase (read-write worktree).
			in2 := phase.Input{Phase: phase.Development, Key: "development", Attempt: 1, Repo: "group/app", Issue: 7,
				Title: "Now MARK-BETA", Plan: "1. do it", SessionName: in1.SessionName, SessionID: r1.SessionID, Resume: true}
			o2 := agenttest.Run(t, ctx, rt, agenttest.Spec{Agent: a, Input: in2, Worktree: worktree, SessionDir: sessions})
			r2, err := o2.Result(a, in2)
			require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", o2.Stdout, o2.Stderr)
			require.Equal(t, r1.SessionID, r2.SessionID)
			require.Contains(t, r2.Summary, "MARK-ALPHA,MARK-BETA", "run 1's history was sent back")
			require.NotEmpty(t, r2.CommitMessage)
			_, err = os.Stat(filepath.Join(worktree, "standin-"+o2.Invocation.Cmd[0]+"-development-a1.txt"))
			require.NoError(t, err, "the read-write phase changed the worktree")
			din, dout, _ := runner.UsageDelta(*r1, *r2, caps.CumulativeUsage)
			require.EqualValues(t, 120, din, "this run's input tokens (cumulative=%t)", caps.CumulativeUsage)
			require.EqualValues(t, 9, dout)

			// Run 3: resume an id that does not exist (state lost).
			in3 := in2
			in3.SessionID = unknownID(a)
			o3 := agenttest.Run(t, ctx, rt, agenttest.Spec{Agent: a, Input: in3, Worktree: worktree, SessionDir: agenttest.HostDir(t)})
			require.NotZero(t, o3.Exit.Code)
			_, err = o3.Result(a, in3)
			require.ErrorIs(t, err, runner.ErrSessionNotFound, "with stderr: %s", o3.Stderr)
			_, err = a.Result(in3, o3.Exit, o3.Stdout, o3.OutDir)
			require.ErrorIs(t, err, runner.ErrSessionNotFound, "from stdout and the exit code only")

			// A second fresh session in the same state dir does not disturb the first.
			if caps.CallerChosenID {
				in4 := in1
				in4.SessionID = uuid.NewString()
				in4.Title = "Other MARK-GAMMA"
				o4 := agenttest.Run(t, ctx, rt, agenttest.Spec{Agent: a, Input: in4, Worktree: worktree, SessionDir: sessions})
				r4, err := o4.Result(a, in4)
				require.NoError(t, err)
				require.NotContains(t, r4.Summary, "MARK-ALPHA")
			}
		})
	}
}

// logTraps reports, without failing, a finding about the runtime's mount layout: Docker creates
// the parents of a mount target below the HOME tmpfs (~/.codex for ~/.codex/sessions) owned by
// root, mode 0755, so a CLI cannot write its own config dir next to the session dir.
func logTraps(t *testing.T, o *agenttest.Outcome) {
	if l := firstLine(string(o.Stderr), "config dir not writable"); l != "" {
		t.Logf("TRAP (runtime mount layout): %s", l)
	}
}

func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// versionAgent runs Capabilities().VersionCommand as the command of the wrapped adapter.
type versionAgent struct{ runner.SessionAgent }

func (v versionAgent) Command(in phase.Input) (runner.Invocation, error) {
	inv, err := v.SessionAgent.Command(phase.Input{Phase: phase.Review, Key: "review"})
	inv.Cmd = v.Capabilities().VersionCommand
	return inv, err
}

// TestTrapSessionMountParentsRootOwned: mounting the session dir below the HOME tmpfs makes the
// runtime create its parents (~/.claude/projects, ~/.codex, ~/.copilot, ~/.gemini/tmp/workspace)
// owned by root, mode 0755, so a real CLI cannot write its config and state files there. The
// stand-in, which writes a state file in its config dir like the CLIs, warns in that case. This
// test shows the layout that avoids it (Spec.WritableParents: a writable per-run directory at
// the config root, intermediate directories pre-created) and logs what happens without it.
func TestTrapSessionMountParentsRootOwned(t *testing.T) {
	cli := runtimetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	image := agenttest.BuildImageOnce(t, ctx, cli)
	rt := docker.New(cli)
	for _, a := range adapters(t, image) {
		t.Run(a.Name(), func(t *testing.T) {
			t.Parallel()
			caps := a.Capabilities()
			in := phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Title: "MARK-ONE", SessionName: "n"}
			if caps.CallerChosenID {
				in.SessionID = uuid.NewString()
			}
			_, _, nested := agenttest.ConfigRoot(caps.SessionStatePath)
			for _, writable := range []bool{false, true} {
				sess := agenttest.HostDir(t)
				o := agenttest.Run(t, ctx, rt, agenttest.Spec{Agent: a, Input: in, Worktree: agenttest.HostDir(t), SessionDir: sess, WritableParents: writable})
				_, err := o.Result(a, in)
				require.NoError(t, err, "stderr: %s", o.Stderr)
				warn := firstLine(string(o.Stderr), "config dir not writable")
				switch {
				case writable || !nested:
					require.Empty(t, warn, "writable parents=%t, state path %s", writable, caps.SessionStatePath)
				case warn != "":
					t.Logf("without writable parents (%s): %s", caps.SessionStatePath, warn)
				}
				if !writable {
					in.SessionID = uuid.NewString() // a new session for the second pass
					if !caps.CallerChosenID {
						in.SessionID = ""
					}
				}
			}
		})
	}
}
