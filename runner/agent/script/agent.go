package script

import (
	"fmt"
	"os"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Name is the adapter name used in config.
const Name = "script"

// ScriptFile is the script's file name in the input directory (/alfred/in/script.yaml).
const ScriptFile = "script.yaml"

// DefaultImage is the image built by deploy/script-agent/Dockerfile.
const DefaultImage = "alfred/script-agent:dev"

// Config configures the script adapter.
type Config struct {
	// Image is the image whose entrypoint is alfred-script-agent (DefaultImage if empty).
	Image string `json:"image" yaml:"image"`
	// ScriptFile is the host path of the script (YAML or JSON).
	ScriptFile string `json:"script_file" yaml:"script_file"`
}

// Agent is the script adapter; it implements runner.Agent.
type Agent struct {
	image  string
	script []byte
}

var _ runner.Agent = (*Agent)(nil)

// New reads and validates cfg.ScriptFile and returns the adapter.
func New(cfg Config) (*Agent, error) {
	data, err := os.ReadFile(cfg.ScriptFile)
	if err != nil {
		return nil, fmt.Errorf("script agent: read script: %w", err)
	}
	return NewFromBytes(cfg.Image, data)
}

// NewFromBytes returns the adapter for a script given in memory (validated with Parse) and an
// image ("" for DefaultImage).
func NewFromBytes(image string, script []byte) (*Agent, error) {
	if _, err := Parse(script); err != nil {
		return nil, fmt.Errorf("script agent: %w", err)
	}
	if image == "" {
		image = DefaultImage
	}
	return &Agent{image: image, script: script}, nil
}

// Name returns "script".
func (a *Agent) Name() string { return Name }

// Command returns the image and the entrypoint's arguments; the script travels as the input
// file ScriptFile (mounted read-only at /alfred/in). No environment is needed.
func (a *Agent) Command(in phase.Input) (runner.Invocation, error) {
	return runner.Invocation{
		Image: a.image,
		Cmd:   []string{"-script", runner.InputDir + "/" + ScriptFile},
		Files: map[string][]byte{ScriptFile: a.script},
	}, nil
}

// Result reads <outDir>/result.json and validates it with phase.ValidateResult. Errors: the
// run was killed; the agent exited non-zero; no result file (wraps phase.ErrNoResult);
// unparsable or invalid result (wraps phase.ErrInvalidResult).
func (a *Agent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	if exit.Killed {
		return nil, fmt.Errorf("script agent: killed (exit code %d)", exit.Code)
	}
	if exit.Code != 0 {
		return nil, fmt.Errorf("script agent: exited with code %d", exit.Code)
	}
	return ReadResult(in, outDir)
}

// ReadResult is runner.ReadResultFile, kept for callers of this package.
func ReadResult(in phase.Input, outDir string) (*phase.Result, error) {
	return runner.ReadResultFile(in, outDir)
}
