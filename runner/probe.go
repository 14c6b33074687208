package runner

import "context"

// CLIProbe is what ProbeCLI found in an agent's image.
type CLIProbe struct {
	// Version is the CLI's version ("2.1.332"); "" for an adapter without sessions, which
	// declares no version command.
	Version string
	// Sessions is true when the adapter resumes sessions; ResumeVerified when Version is one
	// the adapter is verified to resume with.
	Sessions, ResumeVerified bool
}

// ProbeCLI runs a's version command in image in a disposable, labelled container, as the
// first run of an adapter does, and reports the version and whether resuming is verified for
// it. Nothing is recorded. An error says why the version could not be read (the image does
// not start, the command fails, the output has no version).
func (s *Service) ProbeCLI(ctx context.Context, a Agent, image string) (CLIProbe, error) {
	sa, ok := a.(SessionAgent)
	if !ok {
		return CLIProbe{}, nil
	}
	v, err := s.detect(ctx, sa, image)
	if err != nil {
		return CLIProbe{Sessions: true}, err
	}
	return CLIProbe{Version: v, Sessions: true, ResumeVerified: sa.ResumeVerified(v)}, nil
}
