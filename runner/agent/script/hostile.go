package script

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/alfred-bot/alfred/runner"
)

// Hostile are the steps of a prompt-injected agent that attack what Alfred reads back from a
// run (the red-team suite, spec/security.md): a symbolic link or a FIFO planted where Alfred
// reads (the result, an adapter's file, the session state), and a flood of output. Alfred must
// refuse each and say so; the script agent only does them.
//
//	development:
//	  log: ["session: 2f1c…"]                   # printed first, before the flood
//	  flood_after_file: flood                   # optional: the flood waits for out/flood
//	  flood_bytes: 209715200                    # 200 MB of filler lines on stdout
//	  plant:                                    # after the result is written (or not)
//	    - {path: /alfred/out/result.json, link: /etc/alfred/alfred.yaml}
//	    - {path: /alfred/out/copilot-usage.json, fifo: true}
//	    - {path: /workspace/.git/HEAD, content: "ref: refs/heads/main\n"}   # a forged .git
type Hostile struct {
	// Plant lists what to leave at absolute container paths, replacing what is there.
	Plant []Plant `json:"plant,omitempty"`
	// FloodBytes is how many bytes of filler lines to print on stdout after the log lines.
	FloodBytes int64 `json:"flood_bytes,omitempty"`
	// FloodAfterFile holds the flood (after the log lines) until a file of that name exists in
	// the run's output directory, as Step.WaitForFile does: a test releases it once Alfred
	// follows the log.
	FloodAfterFile string `json:"flood_after_file,omitempty"`
}

// Plant is one thing left at Path (absolute, in the container: under /alfred/out or
// /workspace): a symbolic link to Link, a FIFO nobody writes to, or a regular file holding
// Content, its missing directories made and whatever stands on its way that is not a
// directory removed first (the worktree's .git link replaced by a forged repository).
type Plant struct {
	Path    string `json:"path"`
	Link    string `json:"link,omitempty"`
	FIFO    bool   `json:"fifo,omitempty"`
	Content string `json:"content,omitempty"`
}

// floodLine is one filler line (100 bytes with its newline).
var floodLine = strings.Repeat("flood ", 16) + "flood flood…\n"

// flood prints n bytes of filler lines on w (buffered: a flood is fast).
func (h Hostile) flood(w io.Writer) error {
	if h.FloodBytes <= 0 {
		return nil
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	for left := h.FloodBytes; left > 0; {
		line := floodLine
		if int64(len(line)) > left {
			line = line[:left]
		}
		if _, err := bw.WriteString(line); err != nil {
			return err
		}
		left -= int64(len(line))
	}
	return bw.Flush()
}

// plant leaves the step's plants; container paths under runner.OutputDir and
// runner.WorkspaceDir are mapped to outDir and workspace (the same paths in a container).
func (h Hostile) plant(workspace, outDir string, stdout io.Writer) error {
	var errs []error
	for _, p := range h.Plant {
		target, base := p.Path, "/"
		for dir, host := range map[string]string{runner.OutputDir: outDir, runner.WorkspaceDir: workspace} {
			if rel, ok := strings.CutPrefix(p.Path, dir+"/"); ok {
				target, base = filepath.Join(host, filepath.FromSlash(rel)), host
			}
		}
		if p.Content == "" {
			_ = os.Remove(target)
		}
		var err error
		switch {
		case p.Link != "":
			err = os.Symlink(p.Link, target)
		case p.FIFO:
			err = syscall.Mkfifo(target, 0o666)
		case p.Content != "":
			err = plantFile(base, target, p.Content)
		default:
			err = fmt.Errorf("plant %s: want link, fifo or content", p.Path)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("plant %s: %w", p.Path, err))
			continue
		}
		fmt.Fprintf(stdout, "planted %s\n", p.Path)
	}
	return errors.Join(errs...)
}

// plantFile writes content at path, under base (the mapped workspace or output directory),
// making its directories; a file or link where one of them belongs is removed first. The walk
// goes down from base, so a link on the way is removed, never followed.
func plantFile(base, path, content string) error {
	rel, err := filepath.Rel(base, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is outside %s", path, base)
	}
	d := base
	for _, part := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
		if part == "." {
			break
		}
		d = filepath.Join(d, part)
		if st, err := os.Lstat(d); err == nil && !st.IsDir() {
			if err := os.Remove(d); err != nil {
				return err
			}
			break
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return err
	}
	_ = os.Remove(path)
	return os.WriteFile(path, []byte(content), 0o666)
}
