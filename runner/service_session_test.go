package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/postgres"
	"github.com/alfred-bot/alfred/internal/store/sqlstore"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// sessionBundle is a Service with sessions over the stand-in claude CLI in real containers,
// real git and a real PostgreSQL store.
type sessionBundle struct {
	t        *testing.T
	store    *sqlstore.Store
	repo     forge.Repository
	image    string
	dataDir  string
	git      map[string]*gitrepo.Manager
	rt       runner.Runtime
	sessions runner.SessionConfig
}

func newSessionBundle(t *testing.T) *sessionBundle {
	t.Helper()
	db, _ := pgtest.New(t)
	cli := runtimetest.Client(t)
	ctx := context.Background()
	image := agenttest.BuildImageOnce(t, ctx, cli)

	dir := t.TempDir()
	bare := seedRemote(t, dir, nil)
	data := filepath.Join(dir, "data")
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: data, AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: 65532, GID: 65532})
	require.NoError(t, err)
	store := postgres.New(db, nil)
	return &sessionBundle{t: t, store: store, image: image, dataDir: data, git: map[string]*gitrepo.Manager{"gl": mgr},
		repo: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare}, rt: docker.New(cli),
		sessions: runner.SessionConfig{Store: store, Dir: filepath.Join(data, "sessions"), UID: 65532, GID: 65532}}
}

// service binds every phase to the claude-code adapters named in bindings (phase → name).
func (b *sessionBundle) service(bindings map[phase.Phase]string) *runner.Service {
	b.t.Helper()
	agents := map[string]runner.Agent{}
	for _, name := range []string{"claude-code", "claude-other"} {
		a, err := claudecode.New(claudecode.Config{Image: b.image, APIKey: "sk-test-key-123456"})
		require.NoError(b.t, err)
		agents[name] = a
	}
	all := map[phase.Phase]string{}
	for _, p := range []phase.Phase{phase.Analysis, phase.Development, phase.CIFix} {
		all[p] = "claude-code"
	}
	for p, n := range bindings {
		all[p] = n
	}
	exec, err := runner.NewExecutor(runner.Config{Runtime: b.rt, Agents: agents, Bindings: all, DataDir: b.dataDir,
		UID: 65532, GID: 65532})
	require.NoError(b.t, err)
	return runner.NewService(exec, b.git, b.sessions, nil)
}

// mailbox creates an issue mailbox and returns its id.
func (b *sessionBundle) mailbox(n int64) int64 {
	b.t.Helper()
	ref := forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n}
	_, err := b.store.Deliver(context.Background(), forge.Event{Forge: "gl", DeliveryID: "d" + ref.String(),
		BodyHash: "h" + ref.String(), Type: forge.EventComment, Target: ref, Comment: &forge.Comment{Body: "x"}})
	require.NoError(b.t, err)
	mb, err := b.store.Find(context.Background(), ref)
	require.NoError(b.t, err)
	return mb.ID
}

func (b *sessionBundle) run(s *runner.Service, mailboxID int64, p phase.Phase, step phase.Step, title, session string) *phase.Outcome {
	b.t.Helper()
	r := &mailbox.Run{MailboxID: mailboxID, Phase: string(p), Step: string(step)}
	require.NoError(b.t, b.store.StartRun(context.Background(), r))
	out, err := s.Execute(context.Background(), phase.Job{MailboxID: mailboxID, RunID: r.ID, Attempt: r.Attempt,
		ForgeName: "gl", Repository: b.repo, Branch: session, SessionName: session, Push: !p.ReadOnly(),
		Input: phase.Input{Phase: p, Step: step, Repo: "acme/shop", Issue: 1, Title: title}})
	require.NoError(b.t, err)
	require.Empty(b.t, out.Failure, "output:\n%s", out.Output)
	return out
}

func TestSessionResumedAcrossPhasesAndEveryFallback(t *testing.T) {
	b := newSessionBundle(t)
	svc := b.service(nil)
	const name = "agent/issue-1-export"
	a := b.mailbox(1)

	// First (analysis) run of the mailbox: a fresh session, named after the branch.
	out := b.run(svc, a, phase.Analysis, phase.StepFunctional, "MARK-ALPHA export", name)
	first := out.Session
	require.NotNil(t, first)
	require.False(t, first.Resumed)
	require.Equal(t, runner.FallbackNoPriorSession, first.FallbackReason)
	require.Equal(t, name, first.Name)
	require.NotEmpty(t, first.NativeID)

	// Development resumes it: the CLI saw run 1's history.
	out = b.run(svc, a, phase.Development, "", "MARK-BETA build", name)
	require.True(t, out.Session.Resumed)
	require.Empty(t, out.Session.FallbackReason)
	require.Equal(t, first.NativeID, out.Session.NativeID)
	require.Contains(t, out.Result.Summary, "MARK-ALPHA")
	require.NotEmpty(t, out.HeadSHA)
	// Claude Code reports usage summed over the session after a resume: the row keeps the
	// run's share beside what was reported.
	require.Equal(t, first.ReportedIn, out.Session.TokensIn)
	require.Equal(t, 2*first.ReportedIn, out.Session.ReportedIn)

	// Half-written state (no completion marker): fresh, state_missing.
	dir := b.sessions.SessionDir(a, "claude-code")
	require.NoError(t, os.Remove(dir+".ok"))
	out = b.run(svc, a, phase.CIFix, "", "MARK-GAMMA fix", name)
	require.False(t, out.Session.Resumed)
	require.Equal(t, runner.FallbackStateMissing, out.Session.FallbackReason)
	require.NotEqual(t, first.NativeID, out.Session.NativeID)
	require.NotContains(t, out.Result.Summary, "MARK-ALPHA")
	third := out.Session.NativeID

	// The CLI refuses the resume (its session file is gone, the marker still names it): the
	// same run re-invokes it fresh, and the run succeeds.
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), third) {
			return os.Remove(p)
		}
		return err
	}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o644))
	out = b.run(svc, a, phase.CIFix, "", "MARK-DELTA fix", name)
	require.False(t, out.Session.Resumed)
	require.Equal(t, runner.FallbackRefused, out.Session.FallbackReason)
	require.True(t, out.Session.Succeeded)
	require.True(t, strings.HasSuffix(out.Container, "-fresh"), out.Container)

	// Another adapter for the phase: adapter_changed.
	other := b.service(map[phase.Phase]string{phase.Analysis: "claude-other"})
	out = b.run(other, a, phase.Analysis, phase.StepTechnical, "MARK-EPS plan", name)
	require.Equal(t, runner.FallbackAdapterChanged, out.Session.FallbackReason)

	// Isolation: another mailbox starts its own session and never sees this one's history.
	m2 := b.mailbox(2)
	out = b.run(svc, m2, phase.Analysis, phase.StepFunctional, "MARK-ZETA other", "agent/issue-2-other")
	require.Equal(t, runner.FallbackNoPriorSession, out.Session.FallbackReason)
	require.NotContains(t, out.Result.Summary, "MARK-ALPHA")
	require.NotEqual(t, dir, b.sessions.SessionDir(m2, "claude-code"))

	// Sessions off (no session name): no session row, no mount, as before.
	out = b.run(svc, m2, phase.Analysis, phase.StepTechnical, "MARK-ETA plan", "")
	require.Nil(t, out.Session)
	require.Equal(t, "claude-code", out.Adapter, "the agent that ran, so its usage is counted without a session record")
	rows, err := b.store.Sessions(context.Background(), m2)
	require.NoError(t, err)
	require.Len(t, rows, 1)

	// The version detected in the image was recorded.
	inst, err := b.store.Installation(context.Background(), "claude-code", b.image)
	require.NoError(t, err)
	require.NotNil(t, inst)
	require.Equal(t, "2.1.332", inst.Version)
	require.True(t, inst.ResumeVerified)
}

// An operator's image with a CLI version not verified to resume runs fresh, whatever the
// installation record says: whether the recorded version resumes is judged again by this
// release (a record written by another release, or under another verified_versions, may say
// it did).
func TestSessionUnsupportedVersionRunsFresh(t *testing.T) {
	for _, recorded := range []bool{false, true} {
		t.Run(fmt.Sprintf("recorded_verified=%t", recorded), func(t *testing.T) {
			b := newSessionBundle(t)
			a := b.mailbox(1)
			b.run(b.service(nil), a, phase.Analysis, phase.StepFunctional, "MARK-ALPHA", "agent/issue-1-x")
			require.NoError(t, b.store.RecordInstallation(context.Background(), runner.Installation{Adapter: "claude-code",
				Image: b.image, Version: "9.9.9", ResumeVerified: recorded}))
			out := b.run(b.service(nil), a, phase.Analysis, phase.StepTechnical, "MARK-BETA", "agent/issue-1-x")
			require.False(t, out.Session.Resumed)
			require.Equal(t, runner.FallbackUnsupportedVersion, out.Session.FallbackReason)
		})
	}
}

func TestSessionStateRemovedAndOrphansSwept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := runner.SessionConfig{Dir: dir}
	for _, id := range []int64{1, 2, 3} {
		require.NoError(t, os.MkdirAll(cfg.SessionDir(id, "claude-code"), 0o700))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "not-a-mailbox"), []byte("x"), 0o600))
	exec, err := runner.NewExecutor(runner.Config{Runtime: unusedRuntime{}, DataDir: t.TempDir(), UID: 1000, GID: 1000})
	require.NoError(t, err)
	svc := runner.NewService(exec, nil, cfg, nil)

	require.NoError(t, svc.RemoveSessions(1)) // the mailbox closed
	require.NoDirExists(t, filepath.Join(dir, "1"))

	removed, err := svc.SweepSessions(func(id int64) bool { return id == 2 }) // 3 is not open
	require.NoError(t, err)
	require.Equal(t, []int64{3}, removed)
	require.DirExists(t, cfg.SessionDir(2, "claude-code"))
	require.FileExists(t, filepath.Join(dir, "not-a-mailbox"), "only mailbox directories are swept")
}

// unusedRuntime is a Runtime that is never called (the test exercises no container).
type unusedRuntime struct{ runner.Runtime }

// Docker on several hosts: each replica keeps the session state in its own data directory.
// A run on replica B after one on replica A starts fresh with the reason state_elsewhere (the
// record of A's run names A's data directory), not a silent state_missing; B's next run
// resumes B's session; every record names the data directory its state is in.
func TestSessionStateOnAnotherReplica(t *testing.T) {
	a := newSessionBundle(t)
	a.sessions.Host = "replica-a-0001"
	b := *a
	b.dataDir = filepath.Join(t.TempDir(), "data")
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: b.dataDir, AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: 65532, GID: 65532})
	require.NoError(t, err)
	b.git = map[string]*gitrepo.Manager{"gl": mgr}
	b.sessions.Dir, b.sessions.Host = filepath.Join(b.dataDir, "sessions"), "replica-b-0002"

	id := a.mailbox(1)
	first := a.run(a.service(nil), id, phase.Analysis, phase.StepFunctional, "MARK-ALPHA", "agent/issue-1-x")
	require.Equal(t, "replica-a-0001", first.Session.StateHost)
	second := b.run(b.service(nil), id, phase.Analysis, phase.StepTechnical, "MARK-BETA", "agent/issue-1-x")
	require.False(t, second.Session.Resumed)
	require.Equal(t, runner.FallbackStateElsewhere, second.Session.FallbackReason)
	require.Equal(t, "replica-b-0002", second.Session.StateHost)
	require.NotEqual(t, first.Session.NativeID, second.Session.NativeID)
	third := b.run(b.service(nil), id, phase.Development, "", "MARK-GAMMA", "agent/issue-1-x")
	require.True(t, third.Session.Resumed, "B resumes the session it holds")
	require.Equal(t, second.Session.NativeID, third.Session.NativeID)
	require.Contains(t, third.Output, "MARK-BETA,MARK-GAMMA", "the resumed CLI saw B's earlier turn")
	require.NotContains(t, third.Output, "MARK-ALPHA", "A's turns stayed on A")
}

// StateHost is the data directory's id: the same for every replica of one directory, another
// for another directory.
func TestStateHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id, err := runner.StateHost(dir)
	require.NoError(t, err)
	require.Regexp(t, `^([a-z0-9-]+-)?[0-9a-f]{8}$`, id)
	again, err := runner.StateHost(dir)
	require.NoError(t, err)
	require.Equal(t, id, again)
	other, err := runner.StateHost(t.TempDir())
	require.NoError(t, err)
	require.NotEqual(t, id, other)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
}
