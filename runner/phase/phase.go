// Package phase is the contract between the mailbox, which decides what runs, and the runner,
// which runs it: the phases and their steps, the Input an agent gets, the Result it must write
// (with its validation, spec/result-contract.md), the Job the mailbox asks for and the Outcome
// it gets back. It imports only the forge vocabulary, so both sides can share it without
// depending on each other.
package phase

// Phase is one kind of agent step.
type Phase string

// The phases. Analysis phases mount the worktree read-only.
const (
	Analysis           Phase = "analysis"
	Development        Phase = "development"
	CIFix              Phase = "ci_fix"
	ReviewFix          Phase = "review_fix"
	ConflictResolution Phase = "conflict_resolution"
	Answer             Phase = "answer"
	Review             Phase = "review"
	// SelfReview reads the bot's own merge request before a human does: the diff against the
	// plan, the functional analysis and the repository's guidelines, and returns findings.
	SelfReview Phase = "self_review"
)

// All lists every phase, in the order of a mailbox's life.
func All() []Phase {
	return []Phase{Analysis, Development, SelfReview, CIFix, ReviewFix, ConflictResolution, Answer, Review}
}

// ReadOnly reports whether the phase may not change the worktree.
func (p Phase) ReadOnly() bool {
	switch p {
	case Analysis, Answer, Review, SelfReview:
		return true
	}
	return false
}

// Step distinguishes the two analysis runs of a mailbox.
type Step string

// Analysis steps; other phases have no step ("").
const (
	StepFunctional Step = "functional"
	StepTechnical  Step = "technical"
)

// Input is what an agent gets for one run. It is written as JSON to /alfred/in/input.json in the
// container and rendered into the prompt by adapters whose CLI takes a prompt.
type Input struct {
	Phase Phase `json:"phase"`
	Step  Step  `json:"step,omitempty"`
	// Key is the script key of the run: "analysis.functional", "analysis.technical",
	// "development", "ci_fix", … (Phase, plus "."+Step when there is a step).
	Key     string `json:"key"`
	Attempt int    `json:"attempt"`
	// Repo, Issue number, title and description of the issue.
	Repo        string `json:"repo"`
	Issue       int64  `json:"issue"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Type        string `json:"type,omitempty"` // task, bug, analysis, question
	Branch      string `json:"branch,omitempty"`
	// Decisions are the answered questions: id → chosen option label, plus free text.
	Decisions map[string]string `json:"decisions,omitempty"`
	FreeText  string            `json:"free_text,omitempty"`
	// Analysis is the functional analysis (technical step) and Plan the validated plan
	// (development and later).
	Analysis string `json:"analysis,omitempty"`
	Plan     string `json:"plan,omitempty"`
	// CILog holds the failed jobs' log excerpts for ci_fix.
	CILog string `json:"ci_log,omitempty"`
	// Comments are recent human comments, oldest first, for answer and review_fix.
	Comments []string `json:"comments,omitempty"`
	// Model is the model name from the phase binding, "" for the CLI's default.
	Model string `json:"model,omitempty"`
	// Agent is the configured agent bound to the phase for this issue's project (a scoped
	// phases setting); "" runs the phase's global binding.
	Agent string `json:"agent,omitempty"`
	// SessionName is the mailbox's session name (its branch name, frozen at the first run);
	// adapters whose CLI takes a human-readable name pass it (Claude Code -n). "" when
	// sessions are off.
	SessionName string `json:"session_name,omitempty"`
	// SessionID is the CLI session to continue (Resume) or, for CLIs whose new-session id is
	// chosen by the caller (Capabilities.CallerChosenID: a UUID for Claude Code, see
	// spec/agents.md "Adapter notes" 1), the id of the new session; "" for none.
	SessionID string `json:"session_id,omitempty"`
	// Resume is true when SessionID names an existing session to continue rather than a new
	// one to create. Adapters resume by exact id only (spec/agents.md "Adapter notes" 2).
	Resume bool `json:"resume,omitempty"`
	// Guidelines are the repository's own guideline files found in the worktree
	// (CONTRIBUTING.md, AGENTS.md, CLAUDE.md, .editorconfig, …: GuidelineFiles), as paths
	// relative to its root, for a self_review run; the runner fills them.
	Guidelines []string `json:"guidelines,omitempty"`
	// Review holds the merge request, its diff and the comments to address (review_fix) or
	// review (review, self_review); nil for other phases.
	Review *ReviewInput `json:"review,omitempty"`
	// Conflict holds the conflicted files of a conflict_resolution run; nil otherwise.
	Conflict *ConflictInput `json:"conflict,omitempty"`
}

// KeyOf returns the script key for a phase and step.
func KeyOf(p Phase, s Step) string {
	if s == "" {
		return string(p)
	}
	return string(p) + "." + string(s)
}

// Option is one choice of a Question.
type Option struct {
	ID          string `json:"id"`          // "a", "b", …
	Label       string `json:"label"`       // short text
	Description string `json:"description"` // one line
}

// Question is a clarification question returned by the functional analysis.
type Question struct {
	ID      string   `json:"id"` // "q1", "q2", …
	Title   string   `json:"title"`
	Context string   `json:"context,omitempty"`
	Options []Option `json:"options"` // 2 to 4
	Default string   `json:"default"` // an Option.ID
}
