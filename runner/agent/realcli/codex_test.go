//go:build realcli

package realcli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/agent/codex"
)

// TestCodex runs the real Codex CLI: a new thread (MARK-ALPHA) whose id is read from
// thread.started, `exec … resume <that id>` (MARK-BETA; the reply must list MARK-ALPHA), and a
// resume of an unknown UUID.
func TestCodex(t *testing.T) {
	bin := cliBin(t, "codex")
	h := newHost(t)
	a := newCodex(t, h.mock.URL+"/v1")
	m := Meta{Package: npmVersion(t, "@openai/codex")}
	m.Version = h.version(t, bin, a.Capabilities().VersionCommand, a.ParseVersion)
	t.Logf("Codex %s (%s); resume verified for the adapter: %t", m.Version, m.Package, a.ResumeVerified(m.Version))

	var prev *codex.Stream
	for _, run := range []string{runFresh, runResumed, runResumeMiss} {
		ok := t.Run(run, func(t *testing.T) {
			in := input(map[string]string{runFresh: "MARK-ALPHA", runResumed: "MARK-BETA", runResumeMiss: "MARK-GAMMA"}[run])
			switch run {
			case runResumed:
				in.SessionID, in.Resume = prev.ThreadID, true
			case runResumeMiss:
				in.SessionID, in.Resume = codexUnknownID, true
			}
			inv, err := a.Command(in)
			require.NoError(t, err)
			stdout, stderr, exit := h.run(t, bin, inv)
			h.logRequests(t)
			rm := m
			rm.Input = in
			stdout, rm = h.record(t, codexTestdata, run, rm, inv, stdout, stderr, exit)
			s := checkCodex(t, run, stdout, rm, prev)
			if run == runFresh {
				prev = s
			}
			t.Logf("parsed: thread %s, text %q, usage %+v, errors %q", s.ThreadID, s.FinalText, s.Usage, s.Errors)
		})
		if !ok && run == runFresh {
			t.FailNow()
		}
	}
}
