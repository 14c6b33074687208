package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"github.com/alfred-bot/alfred/internal/base/censor"
)

// NamedSecret is a secret of Alfred's configuration that must never be pushed: Name says
// which (a configuration key such as "agents[0].api_key", never the value), Value is the
// secret.
type NamedSecret struct {
	Name  string
	Value string `json:"-"`
}

// ErrSecretInPush is what a *LeakError matches (errors.Is): the commits about to be pushed hold
// a secret, so nothing was pushed.
var ErrSecretInPush = errors.New("the commits to push hold a secret")

// Leak is one secret found in what a push would send: where, and of which kind. It never holds
// the secret itself.
type Leak struct {
	// Path is the file (relative to the repository root) the secret was added to; "" for a
	// commit message, and "" with NameHidden when the file's name holds the secret.
	Path string
	// NameHidden is true when the file's name itself holds a secret, so Path is not given.
	NameHidden bool
	// Commit is the commit that adds it.
	Commit string
	// Kind names the secret in words fit for a comment: "an Anthropic API key (sk-ant-…)",
	// "the value of agents[0].api_key", ….
	Kind string
}

// Where names the leak's place in words fit for a comment: "`.env`", "a commit message", "a
// file whose name holds the secret".
func (l Leak) Where() string {
	switch {
	case l.NameHidden:
		return "a file whose name holds the secret"
	case l.Path == "":
		return "a commit message"
	}
	return "`" + strings.ReplaceAll(l.Path, "`", "'") + "`"
}

// LeakError is the refusal of a push whose commits hold secrets (Push, ScanPush). Its message
// names each file and kind, never a secret.
type LeakError struct {
	Branch string
	Leaks  []Leak
}

// Error lists the leaks: "the commits to push hold a secret: `.env` (an Anthropic API key …)".
func (e *LeakError) Error() string {
	var parts []string
	for _, l := range e.Leaks {
		parts = append(parts, l.Where()+" ("+l.Kind+")")
	}
	return ErrSecretInPush.Error() + ": " + strings.Join(parts, ", ")
}

// Is reports whether target is ErrSecretInPush.
func (e *LeakError) Is(target error) bool { return target == ErrSecretInPush }

// tokenFormats are the secret formats recognised without configuration: the forges' and the
// agent providers' key prefixes, AWS access key ids and PEM private keys. A format's regular
// expression runs only on a text that holds one of its literals (a fast substring search), so
// ordinary code is read at memory speed.
var tokenFormats = []struct {
	lits []string
	re   *regexp.Regexp
	kind string
	// digit requires a digit in the match (the generic sk- form: a kebab-case word is none).
	digit bool
}{
	{lits: []string{"glpat-"}, re: regexp.MustCompile(`\bglpat-[0-9A-Za-z_-]{20,}`), kind: "a GitLab personal access token (glpat-…)"},
	{lits: []string{"gloas-", "gldt-", "glrt-", "glptt-", "glcbt-", "glimt-", "glagent-", "glsoat-", "glffct-"},
		re: regexp.MustCompile(`\bgl(?:oas|dt|rt|ptt|cbt|imt|agent|soat|ffct)-[0-9A-Za-z_-]{20,}`), kind: "a GitLab token"},
	{lits: []string{"github_pat_"}, re: regexp.MustCompile(`\bgithub_pat_[0-9A-Za-z_]{22,}`), kind: "a GitHub fine-grained token (github_pat_…)"},
	{lits: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, re: regexp.MustCompile(`\bgh[pousr]_[0-9A-Za-z]{36,}`), kind: "a GitHub token (ghp_…)"},
	{lits: []string{"sk-ant-"}, re: regexp.MustCompile(`\bsk-ant-[0-9A-Za-z_-]{20,}`), kind: "an Anthropic API key (sk-ant-…)"},
	{lits: []string{"sk-"}, re: regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[0-9A-Za-z_-]{32,}`), kind: "an API key (sk-…)", digit: true},
	{lits: []string{"AKIA", "ASIA"}, re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), kind: "an AWS access key id (AKIA…)"},
	{lits: []string{"AIza"}, re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`), kind: "a Google API key (AIza…)"},
	{lits: []string{"PRIVATE KEY"}, re: regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`), kind: "a private key (-----BEGIN … PRIVATE KEY-----)"},
}

// secretScanner finds the configured secrets (with the censor's encodings: base64, URL forms,
// Basic credentials) and the token formats in a text.
type secretScanner struct {
	named []namedCensor
	// overlap is how many bytes of a long text's last piece searched are searched again with
	// the next (scanPatch): more than the longest form of a secret the scanner finds.
	overlap int
}

type namedCensor struct {
	name string
	c    *censor.Censor
}

// newScanner builds the scanner of secrets, plus the forge token of the manager. A secret
// shorter than censor.MinLen is left out: as a word of code it would refuse ordinary pushes.
func newScanner(secrets []NamedSecret, token, user string) *secretScanner {
	all := append([]NamedSecret{{Name: "the forge token", Value: token}}, secrets...)
	// 4 KiB holds every token format's match (the longest fixed one is 59 bytes; the open-ended
	// ones match from their first 20 or so characters after the prefix).
	s := &secretScanner{overlap: 4 << 10}
	seen := map[string]bool{}
	for _, sec := range all {
		if len(sec.Value) < censor.MinLen || seen[sec.Value] {
			continue
		}
		seen[sec.Value] = true
		name := sec.Name
		if !strings.HasPrefix(name, "the ") {
			name = "the value of " + name
		}
		users := censor.GitUsers
		if user != "" {
			users = append([]string{user}, users...)
		}
		// The longest form the censor looks for: the secret URL-escaped (3 bytes a byte at
		// most), or the base64 of "user:secret" (4 bytes every 3, plus padding).
		longestUser := 0
		for _, u := range users {
			longestUser = max(longestUser, len(u))
		}
		s.overlap = max(s.overlap, 3*len(sec.Value)+2*longestUser+16)
		s.named = append(s.named, namedCensor{name: name, c: censor.New(censor.Config{Secrets: []string{sec.Value}, Users: users})})
	}
	return s
}

// find returns the kind of the first secret in text, "" when there is none.
func (s *secretScanner) find(text string) string {
	for _, n := range s.named {
		if n.c.String(text) != text {
			return n.name
		}
	}
	for _, f := range tokenFormats {
		if !containsAny(text, f.lits) {
			continue
		}
		for _, m := range f.re.FindAllString(text, -1) {
			if !f.digit || strings.ContainsAny(m, "0123456789") {
				return f.kind
			}
		}
	}
	return ""
}

func containsAny(s string, lits []string) bool {
	for _, l := range lits {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// ScanPush returns the secrets that pushing wt's branch would send: in the lines the commits
// not yet on the remote add (what no remote-tracking branch already has: for a merge, only
// the lines that are in neither parent), in the names of the files they add and in their
// messages. Secrets are the configured ones (Config.Secrets and the forge token, each with the
// encodings the censor knows) and the common token formats (GitLab, GitHub, Anthropic and
// sk- API keys, AWS access key ids, Google API keys, PEM private keys).
func (m *Manager) ScanPush(ctx context.Context, wt *Worktree) ([]Leak, error) {
	revs, err := m.gitWT(ctx, wt, nil, "rev-list", "--reverse", "HEAD", "--not", "--remotes=origin")
	if err != nil {
		return nil, fmt.Errorf("list the commits to push: %w", err)
	}
	commits := strings.Fields(revs)
	if len(commits) == 0 {
		return nil, nil
	}
	sc := newScanner(m.cfg.Secrets, m.cfg.Token, m.cfg.Username)
	stdin := []byte(strings.Join(commits, "\n") + "\n")
	// Every message in one read, in the order of commits.
	log, err := m.gitWT(ctx, wt, stdin, "log", "-z", "--no-walk=unsorted", "--stdin", "--format=%H%n%B")
	if err != nil {
		return nil, fmt.Errorf("read the messages of the commits to push: %w", err)
	}
	var leaks []Leak
	for _, c := range commitMessages(log, commits) {
		if kind := sc.find(c.msg); kind != "" {
			leaks = append(leaks, Leak{Commit: c.sha, Kind: kind})
		}
	}
	// One patch per commit: a merge's combined diff (--cc) shows only what it resolved;
	// --text reads binary files as text, so a key in one is found too. The patch is read as git
	// writes it, in bounded pieces: a run may have committed a file of any size.
	var found []Leak
	err = m.gitWTStream(ctx, wt, stdin, func(r io.Reader) error {
		var err error
		found, err = scanPatch(r, commits, sc)
		return err
	}, "diff-tree", "--stdin", "--root", "-r", "-p", "--cc",
		"--text", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/")
	if err != nil {
		return nil, fmt.Errorf("read the changes to push: %w", err)
	}
	leaks = append(leaks, found...)
	return leaks, nil
}

// commitMessage is one commit's sha and message.
type commitMessage struct{ sha, msg string }

// commitMessages splits the output of "git log -z --format=%H%n%B" over commits: entries
// separated by NUL, each the sha, a line break and the message. A NUL inside a message (git
// keeps one) continues the message it is in: text after it is not taken for an entry unless it
// starts with the sha of one of commits, so it is scanned either way.
func commitMessages(log string, commits []string) []commitMessage {
	isCommit := map[string]bool{}
	for _, c := range commits {
		isCommit[c] = true
	}
	var out []commitMessage
	for _, entry := range strings.Split(log, "\x00") {
		sha, msg, _ := strings.Cut(strings.TrimPrefix(entry, "\n"), "\n")
		if isCommit[sha] {
			out = append(out, commitMessage{sha: sha, msg: msg})
			continue
		}
		if n := len(out); n > 0 {
			out[n-1].msg += "\x00" + entry
		} else if entry != "" {
			out = append(out, commitMessage{msg: entry})
		}
	}
	return out
}

// scanChunk is how many bytes of the lines a commit adds to one file are searched at once
// (scanPatch): memory stays bounded whatever the size of a file or of a line.
const scanChunk = 1 << 20

// patchLineMax is the longest piece of a patch line read at once; a longer line (a minified
// file, a binary read as text) is read in pieces of this size.
const patchLineMax = 64 << 10

// scanPatch reads diff-tree's output (each commit's sha on a line of its own, then its patch)
// and returns the secrets in the lines added and in the names of the files added to. A line is
// added when every parent column of its prefix is '+'. The added lines of a file are searched
// scanChunk bytes at a time, each search overlapping the previous one by sc.overlap bytes, so
// that a secret across two pieces is found whole in one.
func scanPatch(r io.Reader, commits []string, sc *secretScanner) ([]Leak, error) {
	isCommit := map[string]bool{}
	for _, c := range commits {
		isCommit[c] = true
	}
	var (
		leaks  []Leak
		commit string
		path   string
		cols   int  // parent columns of a content line (1, or the parents of a merge)
		inHunk bool // after a hunk header, before the next file
		seen   = map[string]bool{}
	)
	add := func(l Leak) {
		key := l.Commit + "\x00" + l.Path + "\x00" + l.Kind + "\x00" + strconv.FormatBool(l.NameHidden)
		if !seen[key] {
			seen[key] = true
			leaks = append(leaks, l)
		}
	}
	// The lines a commit adds to a file, searched each time scanChunk more bytes are held and
	// when the next file starts; fresh counts the bytes not searched yet.
	var (
		added []byte
		fresh int
	)
	search := func() {
		if fresh > 0 && path != "" {
			// Searched in place: find keeps nothing of its text once it returns.
			if kind := sc.find(unsafe.String(unsafe.SliceData(added), len(added))); kind != "" {
				l := Leak{Commit: commit, Path: path, Kind: kind}
				if sc.find(path) != "" {
					l.Path, l.NameHidden = "", true
				}
				add(l)
			}
		}
		fresh = 0
	}
	flush := func() {
		search()
		added = added[:0]
	}
	keep := func(b []byte) {
		added = append(added, b...)
		fresh += len(b)
		if fresh >= scanChunk {
			search()
			if over := len(added) - sc.overlap; over > 0 {
				added = append(added[:0], added[over:]...)
			}
		}
	}
	br := bufio.NewReaderSize(r, patchLineMax)
	// whole is false while the rest of a line longer than patchLineMax is read; adding says
	// whether that line is an added one.
	whole, adding := true, false
	var header []byte // the line that started the file's diff
	for {
		frag, err := br.ReadSlice('\n')
		if len(frag) == 0 && err != nil {
			if err == io.EOF {
				break
			}
			return nil, err
		}
		complete := err == nil || err == io.EOF
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return nil, err
		}
		if !whole {
			if adding {
				keep(frag)
			}
			whole = complete
			continue
		}
		whole = complete
		adding = false
		line := bytes.TrimSuffix(frag, []byte("\n"))
		switch {
		case isCommit[string(line)]:
			flush()
			commit, inHunk = string(line), false
			continue
		case bytes.HasPrefix(line, []byte("diff --git ")) || bytes.HasPrefix(line, []byte("diff --cc ")) || bytes.HasPrefix(line, []byte("diff --combined ")):
			flush()
			path, inHunk = "", false
			header = append(header[:0], line...)
			continue
		case !inHunk && bytes.HasPrefix(line, []byte("new file mode ")):
			// A new file without content (empty) has no "+++" line: its name is only in the
			// header, quoted by git when odd, which leaves a token's characters as they are.
			if kind := sc.find(string(header)); kind != "" {
				add(Leak{Commit: commit, NameHidden: true, Kind: kind})
			}
			continue
		case !inHunk && bytes.HasPrefix(line, []byte("+++ ")):
			path = unquotePath(string(line[len("+++ "):]))
			if kind := sc.find(path); kind != "" {
				add(Leak{Commit: commit, NameHidden: true, Kind: kind})
			}
			continue
		case bytes.HasPrefix(line, []byte("@@")):
			n := 0
			for n < len(line) && line[n] == '@' {
				n++
			}
			cols, inHunk = max(n-1, 1), true
			continue
		}
		if !inHunk || len(line) < cols || path == "" {
			continue
		}
		if len(bytes.Trim(line[:cols], "+")) != 0 {
			continue // context or removed, or in some parent already
		}
		adding = true
		keep(frag[cols:])
		if complete && !bytes.HasSuffix(frag, []byte("\n")) {
			keep([]byte("\n"))
		}
		if err == io.EOF {
			break
		}
	}
	flush()
	return leaks, nil
}

// unquotePath reads the path of a "+++ b/path" line: git quotes a path with unusual bytes as a
// C string ("b/a\tb") and ends a name with a space with a tab; /dev/null (a deleted file) is
// "".
func unquotePath(s string) string {
	s = strings.TrimSuffix(s, "\t")
	if s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			s = u
		}
	}
	return strings.TrimPrefix(s, "b/")
}

// refuseLeaks returns a *LeakError when the commits to push wt's branch hold a secret.
func (m *Manager) refuseLeaks(ctx context.Context, wt *Worktree) error {
	leaks, err := m.ScanPush(ctx, wt)
	if err != nil {
		return err
	}
	if len(leaks) > 0 {
		return &LeakError{Branch: wt.Branch, Leaks: leaks}
	}
	return nil
}
