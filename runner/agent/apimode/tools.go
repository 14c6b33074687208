package apimode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/alfred-bot/alfred/runner/phase"
)

// Bounds of the tools' answers, so that one call cannot fill the model's context.
const (
	// MaxReadBytes is the most read_file and read_diff return per call; the answer says where
	// to continue.
	MaxReadBytes = 64 << 10
	// MaxListEntries is the most entries list_dir returns.
	MaxListEntries = 500
	// MaxMatches is the most lines search_text returns.
	MaxMatches = 200
	// maxSearchFileBytes: search_text skips larger files (generated or data files).
	maxSearchFileBytes = 1 << 20
	// maxSearchFiles bounds the files one search reads.
	maxSearchFiles = 20000
)

// Tool names the model may call.
const (
	ToolListDir    = "list_dir"
	ToolReadFile   = "read_file"
	ToolSearchText = "search_text"
	ToolReadDiff   = "read_diff"
)

// ToolSpec describes one tool to the model: its name, what it does and the JSON schema of its
// arguments (an object).
type ToolSpec struct {
	Name        string
	Description string
	Properties  map[string]any
	Required    []string
}

// Tools are the read-only tools of one run, confined to the run's worktree by an os.Root:
// every path is relative to the worktree, ".." and absolute paths are refused before the
// root is asked, and the root refuses a symbolic link that leads outside it. Nothing is
// written and nothing is executed. The .git entry (a file pointing into the mirror) is
// hidden.
type Tools struct {
	root *os.Root
	diff string // the merge request's diff (review); "" for other phases
}

// OpenTools opens the tools of a run on worktree. in gives the merge request's diff of a
// review run (read_diff). Close releases the root.
func OpenTools(worktree string, in phase.Input) (*Tools, error) {
	root, err := os.OpenRoot(worktree)
	if err != nil {
		return nil, fmt.Errorf("open the worktree: %w", err)
	}
	t := &Tools{root: root}
	if in.Review != nil {
		t.diff = in.Review.Diff
	}
	return t, nil
}

// Close releases the worktree's root.
func (t *Tools) Close() error { return t.root.Close() }

// Specs lists the tools offered to the model: list_dir, read_file, search_text, and read_diff
// when the run has a merge request's diff.
func (t *Tools) Specs() []ToolSpec {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	num := func(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }
	specs := []ToolSpec{
		{Name: ToolListDir, Description: "List a directory of the repository (names, a trailing / for directories, sizes in bytes).",
			Properties: map[string]any{"path": str(`directory relative to the repository root; "" or "." for the root`)}},
		{Name: ToolReadFile, Description: fmt.Sprintf("Read a text file of the repository, at most %d bytes per call from offset.", MaxReadBytes),
			Properties: map[string]any{"path": str("file relative to the repository root"), "offset": num("byte offset to start at (default 0)")},
			Required:   []string{"path"}},
		{Name: ToolSearchText, Description: fmt.Sprintf("Search the repository's text files for a literal string (case-sensitive); answers path:line: text, at most %d lines.", MaxMatches),
			Properties: map[string]any{"query": str("the text to find"), "path": str("directory to search below (default: the whole repository)")},
			Required:   []string{"query"}},
	}
	if t.diff != "" {
		specs = append(specs, ToolSpec{Name: ToolReadDiff, Description: fmt.Sprintf("Read the merge request's unified diff, at most %d bytes per call from offset.", MaxReadBytes),
			Properties: map[string]any{"offset": num("byte offset to start at (default 0)")}})
	}
	return specs
}

// ErrRefused is wrapped by a tool call the tools refuse: a path outside the worktree, an
// unknown tool, bad arguments.
var ErrRefused = errors.New("refused")

// Call runs the tool name with its JSON arguments and returns its answer. An error is told
// to the model (a tool result marked as an error) and does not end the run. A search stops when
// ctx ends (the run's time limit): its error wraps ctx's.
func (t *Tools) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	var a struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
		Query  string `json:"query"`
	}
	if len(bytes.TrimSpace(args)) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return "", fmt.Errorf("%w: the arguments are not a JSON object of the tool's parameters: %v", ErrRefused, err)
		}
	}
	if a.Offset < 0 {
		return "", fmt.Errorf("%w: offset must not be negative", ErrRefused)
	}
	switch name {
	case ToolListDir:
		return t.listDir(a.Path)
	case ToolReadFile:
		return t.readFile(a.Path, a.Offset)
	case ToolSearchText:
		return t.search(ctx, a.Query, a.Path)
	case ToolReadDiff:
		if t.diff == "" {
			return "", fmt.Errorf("%w: this run has no merge request diff", ErrRefused)
		}
		return page(t.diff, a.Offset), nil
	}
	return "", fmt.Errorf("%w: unknown tool %q", ErrRefused, name)
}

// clean returns p as a path relative to the worktree ("." for the root). Refused: an absolute
// path, a ".." element, a NUL, and the .git entry.
func clean(p string) (string, error) {
	p = strings.TrimSpace(p)
	switch {
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("%w: the path holds a NUL byte", ErrRefused)
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return "", fmt.Errorf("%w: %q is absolute; paths are relative to the repository root", ErrRefused, p)
	case slices.Contains(strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }), ".."):
		return "", fmt.Errorf("%w: %q leaves the repository (..)", ErrRefused, p)
	}
	c := path.Clean("/" + p)[1:]
	if c == "" {
		c = "."
	}
	if c == ".git" || strings.HasPrefix(c, ".git/") {
		return "", fmt.Errorf("%w: %q is git's own data, not the repository's files", ErrRefused, p)
	}
	return c, nil
}

// confined turns an os.Root error into a refusal when the root refused to leave the worktree.
func confined(p string, err error) error {
	if err != nil && strings.Contains(err.Error(), "escapes") {
		return fmt.Errorf("%w: %q leads outside the repository", ErrRefused, p)
	}
	return err
}

// throughGit refuses c (clean) when it reaches the worktree's .git entry, or something in it,
// through a symbolic link the repository holds ("self/.git" with self → ., "g" with g →
// .git): each of its leading paths is compared, link followed, with .git itself.
func (t *Tools) throughGit(p, c string) error {
	git, err := t.root.Stat(".git")
	if err != nil || c == "." {
		return nil
	}
	parts := strings.Split(c, "/")
	for i := range parts {
		fi, err := t.root.Stat(strings.Join(parts[:i+1], "/"))
		if err != nil {
			return nil // not there: the caller's own open says so
		}
		if os.SameFile(fi, git) {
			return fmt.Errorf("%w: %q leads to git's own data, not the repository's files", ErrRefused, p)
		}
	}
	return nil
}

// open opens p (clean, confined, not git's own data) below the worktree; c is its cleaned path.
func (t *Tools) open(p string) (f *os.File, c string, err error) {
	if c, err = clean(p); err != nil {
		return nil, "", err
	}
	if err = t.throughGit(p, c); err != nil {
		return nil, "", err
	}
	// A run leaves what it likes in the worktree: only a directory or a regular file is opened,
	// without blocking (a FIFO's open waits for a writer that never comes, and no deadline
	// could end it), and the opened file must be the one looked at.
	st, err := t.root.Stat(c)
	if err != nil {
		return nil, "", confined(p, err)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%w: %q is neither a regular file nor a directory (%s)", ErrRefused, p, st.Mode().Type())
	}
	if f, err = t.root.OpenFile(c, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		return nil, "", confined(p, err)
	}
	if opened, err := f.Stat(); err != nil || !os.SameFile(st, opened) {
		_ = f.Close()
		return nil, "", fmt.Errorf("%w: %q changed while it was opened", ErrRefused, p)
	}
	return f, c, nil
}

func (t *Tools) listDir(p string) (string, error) {
	f, c, err := t.open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return "", confined(p, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var b strings.Builder
	n := 0
	for _, e := range entries {
		if c == "." && e.Name() == ".git" {
			continue
		}
		if n == MaxListEntries {
			fmt.Fprintf(&b, "[… %d more entries]\n", len(entries)-n)
			break
		}
		n++
		switch info, ierr := e.Info(); {
		case e.IsDir():
			fmt.Fprintf(&b, "%s/\n", e.Name())
		case ierr == nil && info.Mode()&fs.ModeSymlink != 0:
			fmt.Fprintf(&b, "%s (symbolic link)\n", e.Name())
		case ierr == nil:
			fmt.Fprintf(&b, "%s %d\n", e.Name(), info.Size())
		default:
			fmt.Fprintf(&b, "%s\n", e.Name())
		}
	}
	if n == 0 {
		return "(empty directory)", nil
	}
	return b.String(), nil
}

func (t *Tools) readFile(p string, offset int64) (string, error) {
	f, _, err := t.open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		return "", fmt.Errorf("%w: %q is a directory; use %s", ErrRefused, p, ToolListDir)
	}
	if offset > info.Size() {
		return "", fmt.Errorf("%w: offset %d is past the end of %q (%d bytes)", ErrRefused, offset, p, info.Size())
	}
	buf := make([]byte, MaxReadBytes)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	buf = buf[:n]
	if bytes.IndexByte(buf, 0) >= 0 {
		return "", fmt.Errorf("%w: %q is a binary file", ErrRefused, p)
	}
	text := string(buf)
	if end := offset + int64(n); end < info.Size() {
		text += more(end, info.Size(), ToolReadFile)
	}
	return text, nil
}

// more tells the model where a text cut after end of its size bytes goes on: tool again from
// offset end.
func more(end, size int64, tool string) string {
	return fmt.Sprintf("\n[… %d of %d bytes shown; call %s again with offset %d for the rest]", end, size, tool, end)
}

// page returns s from offset, at most MaxReadBytes, with where to continue.
func page(s string, offset int64) string {
	if offset >= int64(len(s)) {
		return "(end of the diff)"
	}
	end := min(offset+MaxReadBytes, int64(len(s)))
	out := s[offset:end]
	if end < int64(len(s)) {
		out += more(end, int64(len(s)), ToolReadDiff)
	}
	return out
}

func (t *Tools) search(ctx context.Context, query, p string) (string, error) {
	if query == "" {
		return "", fmt.Errorf("%w: query is empty", ErrRefused)
	}
	c, err := clean(p)
	if err != nil {
		return "", err
	}
	if err := t.throughGit(p, c); err != nil {
		return "", err
	}
	if _, err := t.root.Stat(c); err != nil {
		return "", confined(p, err)
	}
	var b strings.Builder
	matches, files := 0, 0
	q := []byte(query)
	walkErr := fs.WalkDir(t.root.FS(), c, func(name string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("search stopped: the run's time is up: %w", cerr)
		}
		if err != nil {
			return nil // unreadable entries are skipped
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || d.Name() == ".git" {
			return nil // symbolic links are not followed
		}
		if files++; files > maxSearchFiles {
			return fs.SkipAll
		}
		info, err := d.Info()
		if err != nil || info.Size() > maxSearchFileBytes {
			return nil
		}
		data, err := fs.ReadFile(t.root.FS(), name)
		if err != nil || bytes.IndexByte(data, 0) >= 0 || !bytes.Contains(data, q) {
			return nil
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			if !bytes.Contains(line, q) {
				continue
			}
			if matches == MaxMatches {
				b.WriteString("[… more matches; narrow the query or the path]\n")
				return fs.SkipAll
			}
			matches++
			l := string(line)
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			fmt.Fprintf(&b, "%s:%d: %s\n", name, i+1, l)
		}
		return nil
	})
	if walkErr != nil {
		return "", walkErr
	}
	if matches == 0 {
		return "(no match)", nil
	}
	return b.String(), nil
}
