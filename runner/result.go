package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/alfred-bot/alfred/runner/phase"
)

// ReadResultFile reads <outDir>/result.json (the host side of /alfred/out/result.json) and
// validates it with phase.ValidateResult. A missing file is phase.ErrNoResult; a file over phase.MaxResultBytes,
// bad JSON or a contract violation wraps phase.ErrInvalidResult.
func ReadResultFile(in phase.Input, outDir string) (*phase.Result, error) {
	f, err := os.Open(filepath.Join(outDir, phase.ResultFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, phase.ErrNoResult
	}
	if err != nil {
		return nil, fmt.Errorf("open result: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, phase.MaxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	if len(data) > phase.MaxResultBytes {
		return nil, fmt.Errorf("%w: %s larger than %d bytes", phase.ErrInvalidResult, phase.ResultFile, phase.MaxResultBytes)
	}
	return phase.DecodeResult(in, data)
}
