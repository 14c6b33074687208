package clikit

import (
	"bytes"
	_ "embed"
	"fmt"
	"sort"
	"text/template"

	"github.com/alfred-bot/alfred/runner/phase"
)

// MaxPromptBytes bounds the prompt argument. Linux refuses a single argv string over 128 KiB
// (MAX_ARG_STRLEN); above this size the prompt leaves the long fields (description, CI log,
// comments) in /alfred/in/input.json and tells the agent to read them there. Every adapter
// passes the prompt in argv, never on stdin (spec/agents.md, "General rules": stdin is closed).
const MaxPromptBytes = 96 << 10

//go:embed prompt.tmpl
var promptText string

var promptTmpl = template.Must(template.New("prompt").Parse(promptText))

// tasks are the per-phase instructions; contracts the result fields per phase.
var tasks = map[string]string{
	"analysis.functional": "Analyse the issue functionally: restate what is asked, the expected behaviour and the acceptance criteria, and list what is out of scope. Read the code as needed but change nothing. Where the request is ambiguous, ask clarification questions, each with 2 to 4 options and a default; ask none if it is clear.",
	"analysis.technical":  "Write a technical plan for the analysed and decided request: the files and functions to change, the approach, the tests to add, and the risks. Change nothing.",
	"development":         "Implement the validated plan in /workspace, with tests. Keep the change focused. Run the project's tests if you can.",
	"ci_fix":              "The CI pipeline failed on the branch. Find the cause in the log excerpts and the code, and fix it in /workspace.",
	"review_fix":          "Address the review comments above by changing the code in /workspace.",
	"conflict_resolution": "The branch conflicts with its base. Resolve the conflicts in /workspace, keeping the intent of both sides.",
	"answer":              "Answer the question asked in the latest comment, based on the code. Change nothing.",
	"review":              "Review the change on this branch against the plan: correctness, tests, style. Change nothing.",
	"self_review":         "Review your own merge request before a human does. Read its diff against the validated plan and the functional analysis above, and against the repository's own guidelines listed above (when there are any). Report what a careful reviewer would: a missing test, a change outside the plan, an acceptance criterion not met, a convention of the repository not followed, a bug. Mark a finding blocking only when the merge request should not reach a human as it is. Change nothing.",
}

var contracts = map[string]string{
	"analysis.functional": `{"summary": "...", "understanding": "what is asked, in your words", "expected_behaviour": "...", "acceptance_criteria": ["..."], "out_of_scope": ["..."],
 "questions": [{"id": "q1", "title": "...", "context": "...", "options": [{"id": "a", "label": "...", "description": "..."}, {"id": "b", "label": "...", "description": "..."}], "default": "a"}]}
("understanding" is required; "questions" may be empty; each question has 2 to 4 options and a default naming one of them.)`,
	"analysis.technical":  `{"summary": "...", "plan": "the technical plan, in Markdown"} ("plan" is required.)`,
	"development":         `{"summary": "...", "commit_message": "a conventional commit message"} ("commit_message" is required.)`,
	"ci_fix":              `{"summary": "...", "commit_message": "..."}`,
	"review_fix":          `{"summary": "...", "commit_message": "..."}`,
	"conflict_resolution": `{"summary": "...", "commit_message": "..."}`,
	"answer":              `{"summary": "...", "answer": "the answer to post, in Markdown"} ("answer" is required.)`,
	"review":              `{"summary": "the review, in Markdown"}`,
	"self_review": `{"summary": "what you checked, in one or two sentences", "findings": [{"path": "src/file.go", "line": 12, "severity": "blocking", "text": "what is wrong and what to do"}]}
("findings" may be empty; "severity" is blocking, warning or note; "path" is relative to the repository root, "" for the change as a whole; "line" is a line of the new file, 0 for the whole file.)`,
}

// Prompt renders the prompt of a run from prompt.tmpl: the issue, decisions, analysis, plan,
// CI log and comments as present, the phase's task, and the result contract. Over
// MaxPromptBytes it renders a brief variant pointing to /alfred/in/input.json. Errors name
// agent.
func Prompt(agent string, in phase.Input) (string, error) {
	key := in.Key
	if key == "" {
		key = phase.KeyOf(in.Phase, in.Step)
	}
	task, ok := tasks[key]
	if !ok {
		return "", fmt.Errorf("%s: no instructions for run key %q", agent, key)
	}
	data := struct {
		In       phase.Input
		Key      string
		Task     string
		Contract string
		ReadOnly bool
		Brief    bool
	}{in, key, task, contracts[key], in.Phase.ReadOnly(), false}
	var buf bytes.Buffer
	if err := promptTmpl.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("%s: render prompt: %w", agent, err)
	}
	if buf.Len() > MaxPromptBytes {
		data.Brief = true
		buf.Reset()
		if err := promptTmpl.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("%s: render prompt: %w", agent, err)
		}
		if buf.Len() > MaxPromptBytes {
			return "", fmt.Errorf("%s: prompt is %d bytes even without long fields (max %d)", agent, buf.Len(), MaxPromptBytes)
		}
	}
	return buf.String(), nil
}

// Keys lists the run keys there are instructions for, sorted.
func Keys() []string {
	keys := make([]string, 0, len(tasks))
	for k := range tasks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Model returns in.Model, or def when the input names none.
func Model(in phase.Input, def string) string {
	if in.Model != "" {
		return in.Model
	}
	return def
}

// Instructions returns the task and the result contract of a run key, the texts of the CLI
// prompt, for prompts that are not rendered by Prompt (API mode's). ok is false for a key
// without instructions.
func Instructions(key string) (task, contract string, ok bool) {
	task, ok = tasks[key]
	return task, contracts[key], ok
}
