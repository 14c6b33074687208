package mailbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/alfred-bot/alfred/runner/phase"
)

// TypeQuestion is the question asked when an issue has no type:: label (round 0). Its option
// ids are the type names, and the default is "analysis".
func TypeQuestion() phase.Question {
	return phase.Question{
		ID:      "q1",
		Title:   "What kind of work is this issue?",
		Context: "I could not find a type label on the issue. You can also add one of the type labels yourself.",
		Options: []phase.Option{
			{ID: "task", Label: "task", Description: "a change to build: I analyse, plan, then develop it"},
			{ID: "bug", Label: "bug", Description: "something broken to fix: I analyse, plan, then fix it"},
			{ID: "analysis", Label: "analysis", Description: "a study: the analysis in the description is the deliverable"},
			{ID: "question", Label: "question", Description: "a question: I answer it in a comment"},
		},
		Default: "analysis",
	}
}

// RenderQuestions renders a question block: each question with its context and its options as
// checkboxes, the default marked and pre-ticked, how to answer, and the deadline in UTC.
func RenderQuestions(intro string, qs []phase.Question, deadline time.Time) string {
	howTo := "Tick one box per question, or reply with `q1: b` (option letter, number or the start of its text). " +
		"Reply `ok` to take the defaults. Anything else you write is handed to me as extra context and leaves the questions open."
	notice := fmt.Sprintf("**Without an answer by %s, I will apply the defaults.**", deadline.UTC().Format("2006-01-02 15:04 UTC"))
	return renderBlock(intro, howTo, notice, qs, nil)
}

// RenderAnswered renders a question block once answered: the chosen option of each question
// ticked (chosen maps a question id to an option id), and notice (who answered, or that the
// defaults applied) instead of the deadline.
func RenderAnswered(intro string, qs []phase.Question, chosen map[string]string, notice string) string {
	return renderBlock(intro, "", "**"+notice+"**", qs, chosen)
}

func renderBlock(intro, howTo, notice string, qs []phase.Question, chosen map[string]string) string {
	var b strings.Builder
	b.WriteString(intro)
	b.WriteString("\n\n")
	if howTo != "" {
		b.WriteString(howTo + "\n\n")
	}
	b.WriteString(notice + "\n")
	for _, q := range qs {
		fmt.Fprintf(&b, "\n### %s. %s\n", q.ID, q.Title)
		if c := strings.TrimSpace(q.Context); c != "" {
			b.WriteString("\n" + c + "\n")
		}
		b.WriteString("\n")
		ticked := q.Default
		if c, ok := chosen[q.ID]; ok {
			ticked = c
		}
		for i, o := range q.Options {
			box, def := "[ ]", ""
			if o.ID == ticked {
				box = "[x]"
			}
			if o.ID == q.Default {
				def = " _(default)_"
			}
			fmt.Fprintf(&b, "- %s **%s. %s**%s", box, optionLetter(i), o.Label, def)
			if d := strings.TrimSpace(o.Description); d != "" {
				b.WriteString(" — " + d)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func optionLetter(i int) string { return string(rune('a' + i)) }

// Answers is what a human reply or an edited question block says.
type Answers struct {
	// Choices maps a question id to the chosen option id.
	Choices map[string]string
	// Defaults is true when the reply accepts the defaults ("ok", "defaults", 👍, …).
	Defaults bool
	// FreeText is the part of the reply that is not an answer, for the agent.
	FreeText string
}

// acceptWords are replies that accept the defaults, in the languages our users write in.
var acceptWords = map[string]bool{
	"ok": true, "okay": true, "ok!": true, "defaults": true, "default": true, "yes": true, "y": true,
	"lgtm": true, "go": true, "go ahead": true, "sounds good": true, "fine": true, "agreed": true,
	"👍": true, "✅": true, "👌": true, "+1": true,
	"oui": true, "d'accord": true, "ok pour moi": true, "par défaut": true, "valider": true,
	"ja": true, "passt": true, "standard": true, "sí": true, "si": true, "vale": true,
	"sim": true, "да": true, "好": true, "好的": true, "はい": true,
}

var answerLineRE = regexp.MustCompile(`(?i)^\s*[-*]?\s*\**(q\d+)\**\s*[:=)\-–—.]\s*(.+?)\s*$`)

// ParseReply reads a free-text reply against the open questions. Forms understood, per line:
// "q2: b", "q2: 2", "q2 = B", "q2: <start of an option's text>" (case- and accent-insensitive
// prefix); a reply of "ok"/"defaults"/👍 (and translations), or with such a line of its own,
// accepts the defaults. Lines that answer nothing are kept as FreeText. A reply that answers
// one question leaves the others at their defaults. A reply with neither a choice nor Defaults
// (free text only) answers nothing: the round stays open.
func ParseReply(body string, qs []phase.Question) Answers {
	a := Answers{Choices: map[string]string{}}
	norm := strings.ToLower(strings.TrimSpace(strings.Trim(strings.TrimSpace(body), ".!")))
	if acceptWords[norm] || acceptWords[strings.TrimSpace(body)] {
		a.Defaults = true
		return a
	}
	var free []string
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		if l := strings.TrimSpace(line); acceptWords[strings.ToLower(strings.Trim(l, ".!"))] || acceptWords[l] {
			a.Defaults = true // "ok" on a line of its own, among notes
			continue
		}
		m := answerLineRE.FindStringSubmatch(line)
		if m != nil {
			if q, ok := findQuestion(qs, strings.ToLower(m[1])); ok {
				if opt, ok := matchOption(q, m[2]); ok {
					a.Choices[q.ID] = opt
					continue
				}
			}
		}
		if strings.TrimSpace(line) != "" {
			free = append(free, line)
		}
	}
	// A reply that names exactly one option text of a single open question answers it
	// ("bug", "CSV please").
	if len(a.Choices) == 0 && len(qs) == 1 {
		if opt, ok := matchOption(qs[0], strings.TrimSpace(body)); ok && len(free) == 1 {
			a.Choices[qs[0].ID] = opt
			free = nil
		}
	}
	a.FreeText = strings.TrimSpace(strings.Join(free, "\n"))
	return a
}

func findQuestion(qs []phase.Question, id string) (phase.Question, bool) {
	for _, q := range qs {
		if strings.EqualFold(q.ID, id) {
			return q, true
		}
	}
	return phase.Question{}, false
}

// matchOption resolves "b", "2", "B)", or the start of an option's label to an option id.
func matchOption(q phase.Question, s string) (string, bool) {
	// People end answers with emoji and punctuation: "b 🙂", "b!", "**b**".
	s = strings.TrimRightFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	s = strings.TrimSpace(strings.Trim(strings.TrimSpace(s), "*`_.)"))
	if s == "" {
		return "", false
	}
	if id, ok := matchOptionText(q, s); ok {
		return id, true
	}
	// "b please", "2 — the second one": the first word decides.
	if f := strings.Fields(s); len(f) > 1 {
		return matchOptionText(q, strings.Trim(f[0], "*`_.):,"))
	}
	return "", false
}

func matchOptionText(q phase.Question, s string) (string, bool) {
	ls := fold(s)
	if len([]rune(ls)) == 1 {
		r := []rune(ls)[0]
		if r >= 'a' && int(r-'a') < len(q.Options) {
			return q.Options[r-'a'].ID, true
		}
	}
	if n, err := strconv.Atoi(ls); err == nil && n >= 1 && n <= len(q.Options) {
		return q.Options[n-1].ID, true
	}
	var hit string
	for _, o := range q.Options {
		if fold(o.ID) == ls || strings.HasPrefix(fold(o.Label), ls) || (len(ls) >= 3 && strings.HasPrefix(ls, fold(o.Label))) {
			if hit != "" && hit != o.ID {
				return "", false // ambiguous
			}
			hit = o.ID
		}
	}
	return hit, hit != ""
}

// fold lower-cases and strips accents of Latin letters so "Défaut" matches "defaut".
func fold(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case strings.ContainsRune("àáâãäå", r):
			r = 'a'
		case strings.ContainsRune("èéêë", r):
			r = 'e'
		case strings.ContainsRune("ìíîï", r):
			r = 'i'
		case strings.ContainsRune("òóôõö", r):
			r = 'o'
		case strings.ContainsRune("ùúûü", r):
			r = 'u'
		case r == 'ç':
			r = 'c'
		case r == 'ñ':
			r = 'n'
		}
		if unicode.IsSpace(r) {
			r = ' '
		}
		b.WriteRune(r)
	}
	return b.String()
}

var checkboxRE = regexp.MustCompile(`^\s*[-*]\s*\[([ xX])\]\s*\*\*([a-z])\.`)
var headingRE = regexp.MustCompile(`^###\s+(q\d+)\.`)

// ParseTicks reads the checkboxes of an edited question block. For each question with exactly
// one ticked box, or with two where one is the pre-ticked default, it returns the chosen option.
// Questions left as rendered are not returned (they keep their default).
func ParseTicks(body string, qs []phase.Question) map[string]string {
	ticked := map[string][]string{}
	current := ""
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		if m := headingRE.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if m := checkboxRE.FindStringSubmatch(line); m != nil && current != "" && m[1] != " " {
			ticked[current] = append(ticked[current], m[2])
		}
	}
	out := map[string]string{}
	for _, q := range qs {
		var ids []string
		for _, letter := range ticked[q.ID] {
			i := int(letter[0] - 'a')
			if i >= 0 && i < len(q.Options) {
				ids = append(ids, q.Options[i].ID)
			}
		}
		switch {
		case len(ids) == 1 && ids[0] != q.Default:
			out[q.ID] = ids[0]
		case len(ids) == 2 && (ids[0] == q.Default || ids[1] == q.Default):
			if ids[0] == q.Default {
				out[q.ID] = ids[1]
			} else {
				out[q.ID] = ids[0]
			}
		}
	}
	return out
}
