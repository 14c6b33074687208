package runner

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/alfred-bot/alfred/internal/base/runfile"
	"github.com/alfred-bot/alfred/runner/phase"
)

// ReadResultFile reads <outDir>/result.json (the host side of /alfred/out/result.json) through
// internal/base/runfile (the agent controls it: no link out of outDir, a regular file only, a
// deadline) and validates it with phase.ValidateResult. A missing file is phase.ErrNoResult; a
// file over phase.MaxResultBytes wraps phase.ErrInvalidResult and a *runfile.RefusedError; a
// link, a FIFO or a device is a *runfile.RefusedError; bad JSON or a contract violation wraps
// phase.ErrInvalidResult.
func ReadResultFile(in phase.Input, outDir string) (*phase.Result, error) {
	data, err := runfile.Read(outDir, phase.ResultFile, phase.MaxResultBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, phase.ErrNoResult
	case runfile.Reason(err) == runfile.ReasonTooLarge:
		return nil, fmt.Errorf("%w: %w", phase.ErrInvalidResult, err)
	case errors.Is(err, runfile.ErrRefused):
		return nil, err // its words name the file and why
	case err != nil:
		return nil, fmt.Errorf("read result: %w", err)
	}
	return phase.DecodeResult(in, data)
}
