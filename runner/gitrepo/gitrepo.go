// Package gitrepo manages the git side of runs with the host's git CLI (os/exec): one bare
// mirror per project under <DataDir>/mirrors/<forge>/<escaped-repo-path>.git, fetched before each
// run; worktrees under <DataDir>/worktrees/<name> — one per mailbox kept between its runs and
// reset before each (Prepare, Retire), or one per run removed afterwards (AddWorktree,
// RemoveWorktree); at most one spare worktree per mirror under <DataDir>/spares/ for the next
// new mailbox; and the commit and push of a run's branch with the bot identity.
//
// Authentication never puts the token in a remote URL, argv or a log: every git process gets it
// through the environment as an http.extraHeader (GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n /
// GIT_CONFIG_VALUE_n, git ≥ 2.31), as "Authorization: Basic base64(user:token)", which GitLab
// and Forgejo both accept. Git runs with GIT_TERMINAL_PROMPT=0, no system or global config, and
// none of the caller's GIT_* variables.
//
// The mirror is a bare clone whose fetch refspec is +refs/heads/*:refs/remotes/origin/*, so
// remote branches never collide with the local branches worktrees check out. Operations on one
// mirror are serialised within the process.
package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/internal/base/runfile"
)

// Config configures a Manager.
type Config struct {
	// DataDir is the root for mirrors/, worktrees/ and spares/ (absolute or relative to the
	// cwd).
	DataDir string
	// Username and Token authenticate HTTP(S) fetches and pushes (Basic auth). GitLab accepts
	// any username with a token ("oauth2" by convention); Forgejo wants the bot's login. An empty
	// Token sends no header (local paths, tests).
	Username string
	Token    string `json:"-"`
	// AuthorName and AuthorEmail are the bot identity of commits (author and committer).
	AuthorName  string
	AuthorEmail string
	// UID and GID own new worktrees (chown -R) when the process runs as root, so the container
	// user can write them. Zero UID means no chown.
	UID, GID int
	// GitBinary is the git executable ("git" from PATH if empty).
	GitBinary string
	// Secrets are the secrets of Alfred's configuration (agent keys, forge tokens, webhook
	// secrets, the database password, …) that Push refuses to send (ScanPush); Token is always
	// one of them.
	Secrets []NamedSecret `json:"-"`
	// Projects holds checkout settings by repository path (Project.Path, e.g. "big/monorepo")
	// for the repositories that need them.
	Projects map[string]ProjectSettings
}

// Project identifies one repository on a forge.
type Project struct {
	// Forge is a short forge name used as a directory ("gitlab", "forgejo"); [a-z0-9._-]+.
	Forge string
	// Path is the repository path on the forge, e.g. "group/sub/repo".
	Path string
	// CloneURL is the HTTP(S) URL (without credentials) or a local path of the repository.
	CloneURL string
	// DefaultBranch is the branch new run branches start from, e.g. "main".
	DefaultBranch string
	// ProjectSettings are the project's checkout settings; when both are zero, those of
	// Config.Projects for Path apply.
	ProjectSettings
}

// ProjectSettings are the checkout settings of a large repository.
type ProjectSettings struct {
	// Sparse lists the directories (cone mode, relative to the repository root, e.g.
	// "services/api") that worktrees made by Prepare check out; files at the root are always
	// checked out. Empty means the whole tree.
	Sparse []string `yaml:"sparse"`
	// PartialClone makes the mirror a partial clone without blobs (--filter=blob:none): file
	// contents are fetched when a worktree first needs them. The forge must allow filters
	// (GitLab and Forgejo do); for a local remote, use a file:// URL.
	PartialClone bool `yaml:"partial_clone"`
}

// Checkout says what a worktree holds.
type Checkout struct {
	// Branch is the run's branch, e.g. "agent/issue-12-fix-login" (mailbox.BranchName). When it exists on the
	// remote, the worktree checks it out as the remote has it; otherwise it is created from
	// Base. Empty Branch gives a detached worktree at Base (read-only phases).
	Branch string
	// Base is the remote branch to start from; the project's DefaultBranch if empty.
	Base string
}

// Worktree is a checked-out working directory of one run.
type Worktree struct {
	// Name is the worktree's name (a run's for AddWorktree, a mailbox's for Prepare); Path is
	// <DataDir>/worktrees/<Name>.
	Name string
	Path string
	// Branch is the checked-out local branch ("" when detached).
	Branch string
	// NewBranch is true when Branch did not exist on the remote and was created from Base.
	NewBranch bool
	// Head is the commit checked out.
	Head string

	mirror string
	gitDir string // <mirror>/worktrees/<id>, recorded before the agent can touch the worktree
}

// Manager owns the mirrors and worktrees under a data directory. It is safe for concurrent use.
type Manager struct {
	cfg     Config
	mu      sync.Mutex
	locks   map[string]*sync.Mutex
	warming sync.Map                // mirror dir → true while Warm checks out its spare
	trace   func(args []string)     // test hook: sees every git argv
	flock   func(fd, how int) error // test hook: syscall.Flock when nil
}

// New returns a Manager. DataDir is made absolute and created if needed.
func New(cfg Config) (*Manager, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("gitrepo: DataDir is required")
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("gitrepo: resolve data dir: %w", err)
	}
	cfg.DataDir = abs
	if cfg.GitBinary == "" {
		cfg.GitBinary = "git"
	}
	for _, d := range []string{"mirrors", "worktrees", "spares"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("gitrepo: create %s dir: %w", d, err)
		}
	}
	return &Manager{cfg: cfg, locks: map[string]*sync.Mutex{}}, nil
}

var (
	forgeRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	runNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// MirrorDir returns the bare mirror's path: <DataDir>/mirrors/<forge>/<url.PathEscape(path)>.git.
func (m *Manager) MirrorDir(p Project) (string, error) {
	if !forgeRe.MatchString(p.Forge) {
		return "", fmt.Errorf("gitrepo: invalid forge name %q", p.Forge)
	}
	if p.Path == "" || strings.Contains(p.Path, "..") {
		return "", fmt.Errorf("gitrepo: invalid repository path %q", p.Path)
	}
	return filepath.Join(m.cfg.DataDir, "mirrors", p.Forge, url.PathEscape(p.Path)+".git"), nil
}

// WorktreeDir returns <DataDir>/worktrees/<name>.
func (m *Manager) WorktreeDir(name string) string {
	return filepath.Join(m.cfg.DataDir, "worktrees", name)
}

// withSettings returns p with the checkout settings Config.Projects has for its path, unless p
// sets its own.
func (m *Manager) withSettings(p Project) Project {
	if len(p.Sparse) == 0 && !p.PartialClone {
		if s, ok := m.cfg.Projects[p.Path]; ok {
			p.ProjectSettings = s
		}
	}
	return p
}

// lock serialises the work on one mirror (its fetches, its worktrees, its spare) and returns
// the unlock. It takes the mirror's mutex in this process, then an exclusive flock(2) on
// "<mirror>.lock" beside it, so that replicas sharing the data directory (the Kubernetes
// runtime's state claim, spec/kubernetes.md) never run git on one mirror at once: two
// fetches into one bare repository race on its ref locks, and two first clones on its
// directory.
//
// The lock fails closed: when the lock file cannot be opened or flock fails (some network
// filesystems answer ENOLCK, EINVAL or ENOTSUP), nothing is held and the error wraps
// ErrMirrorLock; the caller runs no git on the mirror and the run is retried later.
func (m *Manager) lock(dir string) (func(), error) {
	m.mu.Lock()
	l, ok := m.locks[dir]
	if !ok {
		l = &sync.Mutex{}
		m.locks[dir] = l
	}
	m.mu.Unlock()
	l.Lock()
	f, err := openLockFile(dir + ".lock")
	if err != nil {
		l.Unlock()
		return nil, fmt.Errorf("%w %s: %w", ErrMirrorLock, filepath.Base(dir), err)
	}
	flock := m.flock
	if flock == nil {
		flock = syscall.Flock
	}
	for {
		err = flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		l.Unlock()
		return nil, fmt.Errorf("%w %s: flock: %w", ErrMirrorLock, filepath.Base(dir), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		l.Unlock()
	}, nil
}

// ErrMirrorLock is the error of a mirror whose lock could not be taken (see Manager.lock): no
// git ran on it, and the work can be tried again later.
var ErrMirrorLock = errors.New("gitrepo: cannot lock the mirror")

// openLockFile opens (creating it and its directory) the lock file at path.
func openLockFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}

// Sync creates the project's mirror (git clone --bare) if it is missing and fetches it
// (+refs/heads/*:refs/remotes/origin/*, --prune). It returns the mirror path.
func (m *Manager) Sync(ctx context.Context, p Project) (string, error) {
	p = m.withSettings(p)
	dir, err := m.MirrorDir(p)
	if err != nil {
		return "", err
	}
	unlock, err := m.lock(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	return dir, m.syncLocked(ctx, p, dir)
}

func (m *Manager) syncLocked(ctx context.Context, p Project, dir string) error {
	if p.CloneURL == "" {
		return fmt.Errorf("gitrepo: project %s has no clone URL", p.Path)
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("create mirror parent: %w", err)
		}
		tmp := dir + ".tmp"
		_ = os.RemoveAll(tmp)
		if _, err := m.git(ctx, "", nil, "init", "--bare", "--quiet", tmp); err != nil {
			return fmt.Errorf("init mirror of %s: %w", p.Path, err)
		}
		if _, err := m.git(ctx, tmp, nil, "remote", "add", "origin", p.CloneURL); err != nil {
			return fmt.Errorf("configure mirror of %s: %w", p.Path, err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			return fmt.Errorf("install mirror of %s: %w", p.Path, err)
		}
	} else if err != nil {
		return fmt.Errorf("stat mirror of %s: %w", p.Path, err)
	} else if _, err := m.git(ctx, dir, nil, "remote", "set-url", "origin", p.CloneURL); err != nil {
		return fmt.Errorf("update mirror remote of %s: %w", p.Path, err)
	}
	fetch := []string{"fetch", "--prune", "--no-tags", "--quiet"}
	if p.PartialClone {
		if err := m.partialLocked(ctx, dir); err != nil {
			return fmt.Errorf("make the mirror of %s a partial clone: %w", p.Path, err)
		}
		fetch = append(fetch, "--filter=blob:none")
	}
	if _, err := m.git(ctx, dir, nil, append(fetch, "origin", "+refs/heads/*:refs/remotes/origin/*")...); err != nil {
		return fmt.Errorf("fetch %s: %w", p.Path, err)
	}
	return nil
}

// AddWorktree fetches the mirror (Sync) and adds the worktree <DataDir>/worktrees/<name> for
// co: on co.Branch (the remote's version if it exists, else a new branch from the base), or
// detached at the base when co.Branch is empty. A leftover worktree of the same name is removed
// first. When running as root with Config.UID set, the worktree is chowned to UID:GID.
//
// Errors: invalid name; fetch failure; base branch missing on the remote; the branch is checked
// out in another live worktree.
func (m *Manager) AddWorktree(ctx context.Context, p Project, name string, co Checkout) (*Worktree, error) {
	p = m.withSettings(p)
	if !runNameRe.MatchString(name) {
		return nil, fmt.Errorf("gitrepo: invalid worktree name %q", name)
	}
	dir, err := m.MirrorDir(p)
	if err != nil {
		return nil, err
	}
	unlock, err := m.lock(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := m.syncLocked(ctx, p, dir); err != nil {
		return nil, err
	}
	path := m.WorktreeDir(name)
	if _, err := os.Stat(path); err == nil {
		if err := m.removeLocked(ctx, dir, path); err != nil {
			return nil, fmt.Errorf("remove leftover worktree %s: %w", name, err)
		}
	}
	base := co.Base
	if base == "" {
		base = p.DefaultBranch
	}
	if base == "" {
		return nil, fmt.Errorf("gitrepo: no base branch for %s (set DefaultBranch)", p.Path)
	}
	baseRef := "refs/remotes/origin/" + base
	if !m.refExists(ctx, dir, baseRef) {
		return nil, fmt.Errorf("gitrepo: base branch %q not found on the remote of %s", base, p.Path)
	}
	wt := &Worktree{Name: name, Path: path, Branch: co.Branch, mirror: dir}
	var args []string
	switch {
	case co.Branch == "":
		args = []string{"worktree", "add", "--detach", "--quiet", path, baseRef}
	case m.refExists(ctx, dir, "refs/remotes/origin/"+co.Branch):
		// Reuse the remote branch: the remote is the source of truth (-B resets a stale local one).
		args = []string{"worktree", "add", "--quiet", "-B", co.Branch, path, "refs/remotes/origin/" + co.Branch}
	default:
		wt.NewBranch = true
		args = []string{"worktree", "add", "--quiet", "-B", co.Branch, path, baseRef}
	}
	if co.Branch != "" {
		if _, err := m.git(ctx, dir, nil, "check-ref-format", "refs/heads/"+co.Branch); err != nil {
			return nil, fmt.Errorf("gitrepo: invalid branch name %q", co.Branch)
		}
	}
	if _, err := m.git(ctx, dir, nil, args...); err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", name, err)
	}
	out, err := m.git(ctx, path, nil, "rev-parse", "--absolute-git-dir", "HEAD")
	lines := strings.Split(out, "\n")
	if err != nil || len(lines) != 2 {
		return nil, errors.Join(fmt.Errorf("read worktree head: %w", err), m.removeLocked(ctx, dir, path))
	}
	wt.gitDir, wt.Head = lines[0], lines[1]
	if os.Geteuid() == 0 && m.cfg.UID > 0 {
		if err := chownTree(path, m.cfg.UID, m.cfg.GID); err != nil {
			return nil, errors.Join(fmt.Errorf("chown worktree %s: %w", name, err), m.removeLocked(ctx, dir, path))
		}
	}
	return wt, nil
}

// RemoveWorktree removes the worktree (git worktree remove --force, then prune; the directory
// is deleted even if git fails). Removing a worktree that is already gone is not an error.
func (m *Manager) RemoveWorktree(ctx context.Context, wt *Worktree) error {
	unlock, err := m.lock(wt.mirror)
	if err != nil {
		return err
	}
	defer unlock()
	return m.removeLocked(ctx, wt.mirror, wt.Path)
}

func (m *Manager) removeLocked(ctx context.Context, mirror, path string) error {
	var errs []error
	if _, err := os.Stat(path); err == nil {
		if _, err := m.git(ctx, mirror, nil, "worktree", "remove", "--force", "--force", path); err != nil {
			// Fall back to deleting the directory; prune forgets it below.
			if rmErr := os.RemoveAll(path); rmErr != nil {
				errs = append(errs, err, rmErr)
			}
		}
	}
	if _, err := m.git(ctx, mirror, nil, "worktree", "prune"); err != nil {
		errs = append(errs, fmt.Errorf("prune worktrees: %w", err))
	}
	return errors.Join(errs...)
}

// Sweep removes every directory under <DataDir>/worktrees whose name keep rejects (leftovers of
// runs that crashed), then prunes the worktree records of every mirror. It returns the names
// removed; failures are joined.
func (m *Manager) Sweep(ctx context.Context, keep func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(m.cfg.DataDir, "worktrees"))
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if keep != nil && keep(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.cfg.DataDir, "worktrees", e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("remove worktree %s: %w", e.Name(), err))
			continue
		}
		removed = append(removed, e.Name())
	}
	mirrors, _ := filepath.Glob(filepath.Join(m.cfg.DataDir, "mirrors", "*", "*.git"))
	for _, dir := range mirrors {
		unlock, err := m.lock(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := m.git(ctx, dir, nil, "worktree", "prune"); err != nil {
			errs = append(errs, fmt.Errorf("prune %s: %w", dir, err))
		}
		unlock()
	}
	return removed, errors.Join(errs...)
}

// Commit stages every change in the worktree (tracked, untracked, deletions; .gitignore is
// honoured) and commits it with message as the bot identity. It returns the new commit's sha,
// or "" with a nil error when nothing changed.
func (m *Manager) Commit(ctx context.Context, wt *Worktree, message string) (string, error) {
	if strings.TrimSpace(message) == "" {
		return "", errors.New("gitrepo: empty commit message")
	}
	if m.cfg.AuthorName == "" || m.cfg.AuthorEmail == "" {
		return "", errors.New("gitrepo: AuthorName and AuthorEmail are required to commit")
	}
	if re := m.treeRefusal(ctx, wt); re != nil {
		return "", fmt.Errorf("stage changes: %w", re)
	}
	if re := m.checkChangedSizes(ctx, wt); re != nil {
		return "", fmt.Errorf("stage changes: %w", re)
	}
	if _, err := m.gitWT(ctx, wt, nil, "add", "--all"); err != nil {
		if re := m.notRegularTracked(ctx, wt); re != nil {
			return "", fmt.Errorf("stage changes: %w", re)
		}
		return "", fmt.Errorf("stage changes: %w", err)
	}
	if _, err := m.gitWT(ctx, wt, nil, "diff", "--cached", "--quiet"); err == nil {
		return "", nil // nothing staged
	} else if !isExit(err, 1) {
		return "", fmt.Errorf("check staged changes: %w", err)
	}
	return m.commitStaged(ctx, wt, message)
}

// MaxCommitFileBytes bounds a file Commit stages (100 MiB, the size GitHub refuses a pushed
// file beyond): git reads every byte of a file it stages, and a sparse file of a terabyte costs
// the agent no disk. A changed or new file over it is refused unread.
const MaxCommitFileBytes = 100 << 20

// checkChangedSizes returns a *runfile.RefusedError (runfile.ReasonTooLarge) for the first file
// git would stage that the worktree changed (changed and not yet staged, or new and not ignored:
// git status, which reads no content of an untracked file and tells a changed size from the
// index without reading it) that is larger than MaxCommitFileBytes, nil when there is none
// (firstRefused: lstat in an os.Root, no link followed).
func (m *Manager) checkChangedSizes(ctx context.Context, wt *Worktree) *runfile.RefusedError {
	// "XY path": a rename or copy adds its source as the next entry (--no-renames leaves none).
	// An entry whose worktree column (Y) is blank is staged as it is (the target's files a merge
	// brought): git holds it already, the agent did not change it.
	changed := func(entry string) string {
		if len(entry) < 4 || entry[1] == ' ' {
			return ""
		}
		return entry[3:]
	}
	return m.firstRefused(ctx, wt, changed, func(p string, st fs.FileInfo) *runfile.RefusedError {
		if !st.Mode().IsRegular() || st.Size() <= MaxCommitFileBytes {
			return nil
		}
		return &runfile.RefusedError{Name: p, Reason: runfile.ReasonTooLarge,
			Detail: fmt.Sprintf("it is %d bytes, over the %d a committed file may have", st.Size(), MaxCommitFileBytes)}
	}, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all")
}

// firstRefused runs git with args in wt, which lists NUL-terminated entries, and returns
// refuse's refusal of the first path it refuses (path gives an entry's path, "" to skip the
// entry), or nil. Each path is looked at with lstat inside an os.Root of the worktree (a
// directory linked out is not followed), never opened; a path that cannot be looked at, or
// entries git cannot list, are left to the git call that follows.
func (m *Manager) firstRefused(ctx context.Context, wt *Worktree, path func(entry string) string,
	refuse func(p string, st fs.FileInfo) *runfile.RefusedError, args ...string) *runfile.RefusedError {
	root, err := os.OpenRoot(wt.Path)
	if err != nil {
		return nil
	}
	defer root.Close()
	var found *runfile.RefusedError
	errFound := errors.New("found")
	_ = m.gitWTStream(ctx, wt, nil, func(r io.Reader) error {
		br := bufio.NewReader(r)
		for {
			entry, err := br.ReadString(0)
			if err != nil {
				return nil
			}
			p := path(strings.TrimSuffix(entry, "\x00"))
			if p == "" {
				continue
			}
			st, err := root.Lstat(filepath.FromSlash(p))
			if err != nil {
				continue
			}
			if found = refuse(p, st); found != nil {
				return errFound
			}
		}
	}, args...)
	return found
}

// notRegularTracked returns a *runfile.RefusedError (runfile.ReasonNotRegular) for the first
// tracked path of wt the agent replaced by a FIFO, a socket or a device, which git cannot stage
// ("can only add regular files, symbolic links or git-directories"), and nil when there is none
// (or the paths cannot be listed): the failed staging is then git's own. It is asked only once
// staging failed, so a commit costs no walk of the worktree. Each path is looked at with lstat
// inside an os.Root of the worktree (no link followed), never opened.
func (m *Manager) notRegularTracked(ctx context.Context, wt *Worktree) *runfile.RefusedError {
	tracked := func(entry string) string { return entry }
	return m.firstRefused(ctx, wt, tracked, func(p string, st fs.FileInfo) *runfile.RefusedError {
		if st.Mode()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) == 0 {
			return nil
		}
		return &runfile.RefusedError{Name: p, Reason: runfile.ReasonNotRegular,
			Detail: "it is a FIFO, a socket or a device where the branch has a file; git cannot commit it"}
	}, "ls-files", "-z")
}

// commitStaged commits what is staged (a merge in progress becomes a merge commit) with the
// bot identity and message, records the new head in wt and returns it.
func (m *Manager) commitStaged(ctx context.Context, wt *Worktree, message string) (string, error) {
	if _, err := m.gitWT(ctx, wt, []byte(message), "commit", "--quiet", "--no-verify", "--file=-"); err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	sha, err := m.gitWT(ctx, wt, nil, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("read commit sha: %w", err)
	}
	wt.Head = sha
	return sha, nil
}

// Push pushes the worktree's branch to the remote branch of the same name (fast-forward only;
// a rejected push is an error). Detached worktrees cannot be pushed. Commits that hold a secret
// (ScanPush) are not pushed: the error is a *LeakError (ErrSecretInPush) naming the files and
// kinds.
func (m *Manager) Push(ctx context.Context, wt *Worktree) error {
	if wt.Branch == "" {
		return errors.New("gitrepo: cannot push a detached worktree")
	}
	unlock, err := m.lock(wt.mirror)
	if err != nil {
		return err
	}
	defer unlock()
	if err := m.refuseLeaks(ctx, wt); err != nil {
		return err
	}
	ref := "refs/heads/" + wt.Branch
	if _, err := m.gitWT(ctx, wt, nil, "push", "--quiet", "--porcelain", "origin", ref+":"+ref); err != nil {
		return fmt.Errorf("push %s: %w", wt.Branch, err)
	}
	// Keep the remote-tracking ref current so the next run sees the pushed branch without a fetch.
	if _, err := m.git(ctx, wt.mirror, nil, "update-ref", "refs/remotes/origin/"+wt.Branch, wt.Head); err != nil {
		return fmt.Errorf("update remote-tracking ref: %w", err)
	}
	return nil
}

func (m *Manager) refExists(ctx context.Context, dir, ref string) bool {
	_, ok := m.commitOf(ctx, dir, ref)
	return ok
}

// gitWT runs git on a worktree with its git dir and work tree given explicitly, so nothing the
// agent wrote into the worktree (a replaced .git, say) can point git at another repository or
// config. The worktree's own files are still read (.gitignore); config, hooks and filters come
// only from the mirror and the environment.
func (m *Manager) gitWT(ctx context.Context, wt *Worktree, stdin []byte, args ...string) (string, error) {
	if wt.gitDir == "" {
		return "", errors.New("gitrepo: worktree was not created by this Manager")
	}
	return m.git(ctx, wt.Path, stdin, append([]string{"--git-dir=" + wt.gitDir, "--work-tree=" + wt.Path}, args...)...)
}

// git runs git in dir with the sanitised, authenticated environment and returns its trimmed
// stdout. Errors carry the (redacted) stderr.
func (m *Manager) git(ctx context.Context, dir string, stdin []byte, args ...string) (string, error) {
	if m.trace != nil {
		m.trace(args)
	}
	cmd := exec.CommandContext(ctx, m.cfg.GitBinary, args...)
	cmd.Dir = dir
	cmd.Env = m.env(dir)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", &Error{Args: args, Stderr: m.redact(strings.TrimSpace(errOut.String())), Err: err}
	}
	return strings.TrimSpace(out.String()), nil
}

// gitWTStream is gitWT for an output too large to hold: read consumes git's stdout while git
// runs. When read fails, git is stopped and read's error returned.
func (m *Manager) gitWTStream(ctx context.Context, wt *Worktree, stdin []byte, read func(io.Reader) error, args ...string) error {
	if wt.gitDir == "" {
		return errors.New("gitrepo: worktree was not created by this Manager")
	}
	args = append([]string{"--git-dir=" + wt.gitDir, "--work-tree=" + wt.Path}, args...)
	if m.trace != nil {
		m.trace(args)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.cfg.GitBinary, args...)
	cmd.Dir = wt.Path
	cmd.Env = m.env(wt.Path)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return &Error{Args: args, Err: err}
	}
	if err := read(out); err != nil {
		cancel()
		_ = cmd.Wait()
		return err
	}
	// What read left unread (nothing, for a reader that reads to the end) must not block git.
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return &Error{Args: args, Stderr: m.redact(strings.TrimSpace(errOut.String())), Err: err}
	}
	return nil
}

// env returns the environment of a git process: the caller's without any GIT_* variable, plus
// the auth header, identity and safety settings.
func (m *Manager) env(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	cfg := [][2]string{}
	if m.cfg.Token != "" {
		cred := base64.StdEncoding.EncodeToString([]byte(m.cfg.Username + ":" + m.cfg.Token))
		cfg = append(cfg, [2]string{"http.extraHeader", "Authorization: Basic " + cred})
	}
	if dir != "" {
		// Worktrees are chowned to the container user; let root's git work in them.
		cfg = append(cfg, [2]string{"safe.directory", dir})
	}
	cfg = append(cfg, [2]string{"core.hooksPath", os.DevNull}, [2]string{"commit.gpgSign", "false"})
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(cfg)))
	for i, kv := range cfg {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	env = append(env,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME="+m.cfg.AuthorName,
		"GIT_AUTHOR_EMAIL="+m.cfg.AuthorEmail,
		"GIT_COMMITTER_NAME="+m.cfg.AuthorName,
		"GIT_COMMITTER_EMAIL="+m.cfg.AuthorEmail,
	)
	return env
}

// redact removes the token, its encodings and its Basic credential from s.
func (m *Manager) redact(s string) string {
	return censor.New(censor.Config{Secrets: []string{m.cfg.Token}, Users: []string{m.cfg.Username}}).String(s)
}
