package runner

import (
	"fmt"
	"os"
	"path/filepath"
)

// layOut (re)creates the host side of a compiled run under runDir: in/ with c.Files (readable
// by all), out/ (writable by the container user: chowned to uid:gid when the process runs as
// root, world-writable otherwise) and, for a session mount nested in a configuration root,
// home/<c.HomeDirs> owned by the container user.
func layOut(runDir string, c Compiled, uid, gid int) error {
	if err := os.RemoveAll(runDir); err != nil { // a crashed run's leftovers
		return fmt.Errorf("clear run dir: %w", err)
	}
	inDir, outDir := filepath.Join(runDir, "in"), filepath.Join(runDir, "out")
	for _, d := range []string{inDir, outDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create run dir: %w", err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // regardless of umask
			return fmt.Errorf("chmod run dir: %w", err)
		}
	}
	for n, b := range c.Files {
		p := filepath.Join(inDir, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", n, err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			return fmt.Errorf("chmod %s: %w", n, err)
		}
	}
	var err error
	if os.Geteuid() == 0 {
		err = os.Chown(outDir, uid, gid)
	} else {
		err = os.Chmod(outDir, 0o777)
	}
	if err != nil {
		return fmt.Errorf("give output dir to the container user: %w", err)
	}
	if c.HomeDirs == "" {
		return nil
	}
	home := filepath.Join(runDir, "home")
	if err := os.MkdirAll(filepath.Join(home, c.HomeDirs), 0o755); err != nil {
		return fmt.Errorf("create the configuration root: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return filepath.WalkDir(home, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	})
}
