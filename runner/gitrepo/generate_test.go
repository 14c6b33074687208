package gitrepo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoShape is the size of a generated repository: Commits commits on main, the first of which
// adds Files files (in directories of 30 files each) and a .gitignore of *.log and node_modules/;
// every later commit changes one file.
type repoShape struct {
	Name    string
	Commits int
	Files   int
}

var (
	smallRepo = repoShape{Name: "small", Commits: 10, Files: 10}
	largeRepo = repoShape{Name: "large", Commits: 10_000, Files: 3_000}
)

// fileName is the path of file i of a generated repository: d<i/30>/f<i>.txt.
func fileName(i int) string { return fmt.Sprintf("d%03d/f%05d.txt", i/30, i) }

// generateRepo writes a bare repository of the given shape under dir with git fast-import
// (seconds for 10,000 commits, where a commit loop would take minutes) and returns its path.
// Every file holds a few hundred bytes.
func generateRepo(tb testing.TB, dir string, shape repoShape) string {
	tb.Helper()
	bare := filepath.Join(dir, shape.Name+".git")
	run(tb, dir, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = bare
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(tb, cmd.Start())
	w := bufio.NewWriterSize(stdin, 1<<20)
	content := func(i, rev int) string {
		return fmt.Sprintf("file %d revision %d\n%0300d\n", i, rev, i)
	}
	for c := 0; c < shape.Commits; c++ {
		msg := fmt.Sprintf("commit %d\n", c)
		fmt.Fprintf(w, "commit refs/heads/main\nmark :%d\ncommitter Gen <gen@example.com> %d +0000\ndata %d\n%s",
			c+1, 1_700_000_000+c, len(msg), msg)
		if c > 0 {
			fmt.Fprintf(w, "from :%d\n", c)
		}
		if c == 0 {
			ignore := "*.log\nnode_modules/\n"
			fmt.Fprintf(w, "M 100644 inline .gitignore\ndata %d\n%s\n", len(ignore), ignore)
			for i := 0; i < shape.Files; i++ {
				body := content(i, 0)
				fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", fileName(i), len(body), body)
			}
		} else {
			i := c % shape.Files
			body := content(i, c)
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", fileName(i), len(body), body)
		}
		w.WriteString("\n")
	}
	require.NoError(tb, w.Flush())
	require.NoError(tb, stdin.Close())
	require.NoError(tb, cmd.Wait(), "fast-import: %s", out.String())
	return bare
}
