package doctor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// images is an Engine holding a fixed set of images.
type images map[string]bool

func (images) Ping(context.Context) error { return nil }
func (i images) ImageExists(_ context.Context, image string) (bool, error) {
	return i[image], nil
}

type prober map[string]doctor.CLIProbe

func (p prober) ProbeCLI(_ context.Context, a doctor.Agent) (doctor.CLIProbe, error) {
	v, ok := p[a.Image]
	if !ok {
		return v, errors.New("exec: no such file")
	}
	return v, nil
}

const public = "http://alfred.example:8080"

func forgejoClient(t *testing.T, s *forgetest.ForgejoServer, token string) *forgejo.Client {
	t.Helper()
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: s.URL, Token: token, MaxRetries: -1})
	require.NoError(t, err)
	return c
}

func good(t *testing.T) (*forgetest.ForgejoServer, doctor.Config) {
	t.Helper()
	s := forgetest.NewForgejoServer(t)
	s.AddRepo("alice/shop", "main", s.URL+"/alice/shop.git")
	s.SetAccessLevel("alice/shop", forgetest.BotLogin, 40)
	s.AddHook("alice/shop", forge.Hook{URL: public + "/webhooks/fj", ContentType: "json", Active: true,
		Events: append(append([]string{}, doctor.ForgejoEvents...), "status")})
	return s, doctor.Config{
		ConfigFile: "alfred.yaml", PublicURL: public,
		Database: func(context.Context) error { return nil },
		Engine:   images{"alfred/script-agent:dev": true, "alfred/claude-code:2.1.332": true},
		Agents: []doctor.Agent{{Name: "script", Adapter: "script", Image: "alfred/script-agent:dev", Phases: []string{"default"}},
			{Name: "claude", Adapter: "claude-code", Image: "alfred/claude-code:2.1.332", Phases: []string{"analysis"}}},
		Prober: prober{"alfred/claude-code:2.1.332": {Version: "2.1.332", Sessions: true, ResumeVerified: true}},
		Forges: []doctor.Forge{{Name: "fj", Kind: forge.KindForgejo, BotUser: forgetest.BotLogin,
			Repos: []string{"alice/shop"}, Client: forgejoClient(t, s, s.Token)}},
	}
}

func write(t *testing.T, r *doctor.Report, name string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, r.Write(&b))
	golden := filepath.Join("testdata", name+".golden.txt")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "UPDATE_GOLDEN=1 writes it")
	require.Equal(t, string(want), b.String())
	return b.String()
}

func TestAllGood(t *testing.T) {
	t.Parallel()
	_, cfg := good(t)
	r := doctor.Run(t.Context(), cfg)
	write(t, r, "all_good")
	require.False(t, r.Blocking(), "%+v", r.Results)
}

func TestFindsWrongTokenMissingWebhookMissingImage(t *testing.T) {
	t.Parallel()
	s, cfg := good(t)
	cfg.Engine = images{"alfred/script-agent:dev": true} // claude's image is gone
	other := forgetest.NewForgejoServer(t)
	other.AddRepo("alice/shop", "main", "")
	other.SetAccessLevel("alice/shop", forgetest.BotLogin, 40) // no hook on this one
	cfg.Forges = []doctor.Forge{
		{Name: "fj", Kind: forge.KindForgejo, BotUser: forgetest.BotLogin, Repos: []string{"alice/shop"},
			Client: forgejoClient(t, s, "not-the-token")},
		{Name: "fj2", Kind: forge.KindForgejo, BotUser: forgetest.BotLogin, Repos: []string{"alice/shop"},
			Client: forgejoClient(t, other, other.Token)},
	}
	r := doctor.Run(t.Context(), cfg)
	out := write(t, r, "three_failures")
	require.True(t, r.Blocking())
	require.Len(t, r.Failed(), 3, out)
	require.NotContains(t, out, other.Token)
}

func TestForgeProblems(t *testing.T) {
	t.Parallel()
	s, cfg := good(t)
	s.AddRepo("alice/readonly", "main", "")
	s.AddRepo("alice/badhook", "main", "")
	s.SetAccessLevel("alice/badhook", forgetest.BotLogin, 40)
	s.AddHook("alice/badhook", forge.Hook{URL: public + "/webhooks/fj", ContentType: "form", Active: true,
		Events: []string{"issues", "push"}})
	cfg.Forges[0].Repos = []string{"alice/readonly", "alice/badhook", "alice/missing"}
	cfg.Forges[0].BotUser = "someone-else"
	r := doctor.Run(t.Context(), cfg)
	require.True(t, r.Blocking())
	write(t, r, "wrong_bot_user")

	cfg.Forges[0].BotUser = forgetest.BotLogin
	r = doctor.Run(t.Context(), cfg)
	write(t, r, "forge_problems")
	require.Len(t, r.Failed(), 3, "read-only, bad hook, missing repository")
}

func TestGitLab(t *testing.T) {
	t.Parallel()
	s := forgetest.NewGitLabServer(t)
	s.AddRepo("grp/proj", "main", "")
	s.SetAccessLevel("grp/proj", forgetest.BotLogin, 30)
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: s.URL, Token: s.Token, MaxRetries: -1, RetryWaitMax: time.Millisecond})
	require.NoError(t, err)
	cfg := doctor.Config{Forges: []doctor.Forge{{Name: "gl", Kind: forge.KindGitLab, BotUser: forgetest.BotLogin,
		Repos: []string{"grp/proj"}, Client: c}}}
	r := doctor.Run(t.Context(), cfg)
	require.False(t, r.Blocking(), "a Developer works; the hook is only unverified")
	write(t, r, "gitlab_developer")

	s.SetAccessLevel("grp/proj", forgetest.BotLogin, 40)
	s.AddHook("grp/proj", forge.Hook{URL: "http://elsewhere.example/webhooks/gl", Active: true, Events: doctor.GitLabEvents})
	r = doctor.Run(t.Context(), cfg)
	require.False(t, r.Blocking(), "no public_url: the path is what is checked")
	write(t, r, "gitlab_maintainer")
}

func TestConfigErrorStopsEarly(t *testing.T) {
	t.Parallel()
	r := doctor.Run(t.Context(), doctor.Config{ConfigFile: "alfred.yaml", ConfigErr: errors.New("forges[0].base_url: required")})
	require.True(t, r.Blocking())
	require.Len(t, r.Results, 1)
}

// Gitea 1.25 answers the events of a hook created with the review events as one group.
func TestGiteaReviewGroup(t *testing.T) {
	t.Parallel()
	s, cfg := good(t)
	s.AddRepo("alice/gitea", "main", "")
	s.SetAccessLevel("alice/gitea", forgetest.BotLogin, 40)
	s.AddHook("alice/gitea", forge.Hook{URL: public + "/webhooks/fj", ContentType: "json", Active: true,
		Events: []string{"issue_assign", "pull_request_review", "issue_comment", "pull_request", "pull_request_sync",
			"issues", "pull_request_comment", "status", "issue_label"}})
	cfg.Forges[0].Repos = []string{"alice/gitea"}
	r := doctor.Run(t.Context(), cfg)
	require.False(t, r.Blocking(), "%+v", r.Failed())
}

// A database probe that panics is the failed database check with its fix; the other checks
// still run.
func TestDatabaseProbePanicIsAFailedCheck(t *testing.T) {
	rep := doctor.Run(context.Background(), doctor.Config{
		Database: func(context.Context) error { var p *struct{ n int }; return errors.New(string(rune(p.n))) },
		Engine:   images{},
	})
	var out bytes.Buffer
	require.NoError(t, rep.Write(&out))
	require.True(t, rep.Blocking())
	require.Contains(t, out.String(), "[FAIL] database: the check failed unexpectedly")
	require.Contains(t, out.String(), "fix: start PostgreSQL")
	require.Contains(t, out.String(), "[ok]   docker: engine reachable")
}

// A hook whose URL is the webhook URL in another spelling (the host's case, the scheme's
// default port, a trailing '/', a query GitLab lets one add) is the webhook Alfred needs:
// doctor says so as reconciliation does (forge.SameHookURL); a hook to another path is not.
func TestWebhookURLSpellings(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"HTTP://Alfred.Example:8080/webhooks/fj/":    true,
		"http://alfred.example:8080/webhooks/fj?x=1": true,
		"http://alfred.example:8080/webhooks/fj2":    false,
	} {
		s, cfg := good(t)
		s.AddRepo("alice/spelled", "main", "")
		s.SetAccessLevel("alice/spelled", forgetest.BotLogin, 40)
		s.AddHook("alice/spelled", forge.Hook{URL: url, ContentType: "json", Active: true,
			Events: append(append([]string{}, doctor.ForgejoEvents...), "status")})
		cfg.Forges[0].Repos = []string{"alice/spelled"}
		r := doctor.Run(t.Context(), cfg)
		require.Equal(t, !ok, r.Blocking(), "%s: %+v", url, r.Failed())
	}
}

// A forge that accepts connections and never answers, a database and an engine that never
// answer: every check ends at its deadline, fails saying so, and the checklist is printed.
func TestEveryCheckHasADeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() }) // accepted, never answered
		}
	}()
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: "http://" + ln.Addr().String(), Token: "t0ken-never-answered", MaxRetries: -1})
	require.NoError(t, err)
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	cfg := doctor.Config{ConfigFile: "alfred.yaml", PublicURL: public, CheckTimeout: 200 * time.Millisecond, RunTimeout: 300 * time.Millisecond,
		Database: func(context.Context) error { <-never; return nil }, // ignores its context
		Engine:   images{"alfred/claude-code:2.1.332": true},
		Agents:   []doctor.Agent{{Name: "claude", Adapter: "claude-code", Image: "alfred/claude-code:2.1.332", Phases: []string{"analysis"}}},
		Prober: proberFunc(func(ctx context.Context, _ doctor.Agent) (doctor.CLIProbe, error) {
			<-ctx.Done()
			return doctor.CLIProbe{}, ctx.Err()
		}),
		Forges: []doctor.Forge{{Name: "fj", Kind: forge.KindForgejo, BotUser: forgetest.BotLogin, Repos: []string{"alice/shop"}, Client: c}}}
	done := make(chan *doctor.Report, 1)
	go func() { done <- doctor.Run(context.Background(), cfg) }()
	var rep *doctor.Report
	select {
	case rep = <-done:
	case <-time.After(time.Minute): // a hang, not a timing assertion: the deadlines are 0.3 s
		t.Fatal("the doctor did not end")
	}
	var b bytes.Buffer
	require.NoError(t, rep.Write(&b))
	out := b.String()
	require.Contains(t, out, "[FAIL] database: no answer within 200ms")
	require.Contains(t, out, "[FAIL] forge fj: token: cannot reach the forge: no answer within 200ms")
	require.Contains(t, out, "agent claude: CLI: version not detected (no answer within 300ms")
	require.True(t, rep.Blocking())
}

type proberFunc func(ctx context.Context, a doctor.Agent) (doctor.CLIProbe, error)

func (f proberFunc) ProbeCLI(ctx context.Context, a doctor.Agent) (doctor.CLIProbe, error) {
	return f(ctx, a)
}

// The database check's fix names the store in use: PostgreSQL's server, or the SQLite file
// (missing, held by another process, unreadable).
func TestDatabaseFixMatchesTheStore(t *testing.T) {
	for _, tc := range []struct {
		name, sqlite string
		err          error
		fix          string
	}{
		{"postgres", "", errors.New("dial tcp 127.0.0.1:5432: connection refused"), "fix: start PostgreSQL"},
		{"sqlite missing", "/data/alfred.db", fmt.Errorf("%w at /data/alfred.db", doctor.ErrNoSQLite), "fix: nothing to do on a first start: `alfred serve` (or `alfred migrate`) creates /data/alfred.db; if it should exist already"},
		{"sqlite in use", "/data/alfred.db", fmt.Errorf("%w: locked", doctor.ErrSQLiteInUse), "fix: another process holds /data/alfred.db"},
		{"sqlite unreadable", "/data/alfred.db", errors.New("permission denied"), "fix: check /data/alfred.db: its directory exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := doctor.Run(context.Background(), doctor.Config{ConfigFile: "alfred.yaml", PublicURL: public, SQLite: tc.sqlite,
				Database: func(context.Context) error { return tc.err }})
			var b bytes.Buffer
			require.NoError(t, rep.Write(&b))
			require.Contains(t, b.String(), tc.fix)
			require.Equal(t, tc.name != "sqlite missing", rep.Blocking(), "only a missing SQLite file is a warning (a first start)")
			if tc.sqlite != "" {
				require.NotContains(t, b.String(), "PostgreSQL (", "no PostgreSQL fix for a SQLite store")
				require.False(t, strings.Contains(b.String(), "start PostgreSQL"))
			}
		})
	}
}

// An agent image whose version command exits non-zero fails its check (it used to be a
// warning, with the image line [ok]).
func TestBrokenAgentImageFails(t *testing.T) {
	_, cfg := good(t)
	cfg.Prober = proberFunc(func(context.Context, doctor.Agent) (doctor.CLIProbe, error) {
		return doctor.CLIProbe{}, &doctor.ExitError{Code: 127, Output: "exec: claude: not found"}
	})
	rep := doctor.Run(context.Background(), cfg)
	var b bytes.Buffer
	require.NoError(t, rep.Write(&b))
	require.Contains(t, b.String(), "[FAIL] agent claude: CLI: alfred/claude-code:2.1.332 does not run the claude-code CLI: its command exited 127: exec: claude: not found")
	require.True(t, rep.Blocking())
}
