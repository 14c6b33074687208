package mailbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

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
	notice := fmt.Sprintf("**Without an answer by %s, I will apply the defaults.**", deadlineText(deadline))
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

// deadlineText is a question round's deadline as the issue says it, in UTC to the minute
// ("2026-11-30 10:00 UTC"). ask rounds a deadline of a minute or more up to the minute; a
// shorter one is not rounded, and is said to the second, rounded up, so that the time said is
// never earlier than the real one.
func deadlineText(t time.Time) string {
	t = t.UTC()
	if s := t.Truncate(time.Second); !s.Equal(t) {
		t = s.Add(time.Second)
	}
	if t.Truncate(time.Minute).Equal(t) {
		return t.Format("2006-01-02 15:04 UTC")
	}
	return t.Format("2006-01-02 15:04:05 UTC")
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
	"ja": true, "passt": true, "standard": true, "einverstanden": true, "in ordnung": true,
	"alles klar": true, "sí": true, "si": true, "vale": true, "fine by me": true,
	"take the defaults": true, "use the defaults": true,
	"sim": true, "да": true, "好": true, "好的": true, "はい": true,
}

// answerLineRE is one answer of a reply: "q2: b", "- q2 = B", "1. **q2**) b".
var answerLineRE = regexp.MustCompile(`(?i)^\s*(?:[-*+]|\d+[.)])?\s*\**(q\d+)\**\s*[:=)\-–—.]\s*(.+?)\s*$`)

// nextAnswerRE finds a second answer on a line ("q1: b, q2: a", "q1 - b; q2 - a", "q1: b and
// q2: a"): a comma, semicolon, slash or "and", then (group 1) a question id, a separator as
// answerLineRE takes them and the answer.
var nextAnswerRE = regexp.MustCompile(`(?i)(?:[,;/]|\s(?:and|et|und|y|e)\s)\s*(q\d+\s*[:=)\-–—]\s*\S)`)

// spacedAnswerRE finds a second answer after a space alone ("q1: b q2: a"): group 1 a question
// id, ":" or "=" and the answer. It splits only after a whole answer (splitAnswers), so that a
// note's "by Q2 - a deadline" or "if q2: b then" answers nothing.
var spacedAnswerRE = regexp.MustCompile(`(?i)\s(q\d+\s*[:=]\s*\S)`)

// numberedLineRE is an answer that names its question by number alone, as a numbered list
// does ("1: b", "2. Semicolon", "1) b"): group 1 the question's position, group 2 the answer.
var numberedLineRE = regexp.MustCompile(`^\s*(\d+)\s*[:=.)]\s*(.+?)\s*$`)

// shortcodes are the emoji a forge's editor writes as a shortcode (GitLab's and Forgejo's ":"
// completion store ":thumbsup:" in the comment and show 👍).
var shortcodes = strings.NewReplacer(":+1:", "👍", ":thumbsup:", "👍", ":white_check_mark:", "✅",
	":heavy_check_mark:", "✅", ":ok_hand:", "👌")

// invisible are the characters a reply may carry that change nothing a reader sees: zero-width
// spaces and joiners, the word joiner and byte order mark, the variation selectors of emoji
// (👍 followed by U+FE0F), and the skin tone modifiers (👍🏽).
func invisible(r rune) bool {
	switch {
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF, r == 0xFE0E, r == 0xFE0F:
		return true
	case r >= 0x1F3FB && r <= 0x1F3FF:
		return true
	}
	return false
}

// cleanReply drops the invisible characters of a reply and writes typographic apostrophes
// (’ ‘ ʼ) as ' so that "D’accord" reads as "d'accord".
func cleanReply(body string) string {
	body = shortcodes.Replace(body)
	return strings.Map(func(r rune) rune {
		switch {
		case invisible(r):
			return -1
		case r == '’' || r == '‘' || r == 'ʼ':
			return '\''
		}
		return narrow(r)
	}, body)
}

// narrow writes a full-width form (U+FF01–U+FF5E: what a Chinese, Japanese or Korean keyboard
// types for "q1：b，q2：a", "ｂ") as its ASCII character, and the ideographic comma as a comma.
func narrow(r rune) rune {
	switch {
	case r >= 0xFF01 && r <= 0xFF5E:
		return r - 0xFEE0
	case r == '、':
		return ','
	case r == '\u3000': // ideographic space
		return ' '
	}
	return r
}

// unquoted drops the quoted lines of a reply ("> …", what it answers, Alfred's question block
// included): they are not the replier's words.
func unquoted(body string) string {
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), ">") {
			kept = append(kept, l)
		}
	}
	return strings.TrimSpace(strings.Join(kept, "\n"))
}

// isAccept reports whether text, a whole reply or a line of its own, accepts the defaults.
func isAccept(text string) bool {
	t := strings.TrimSpace(text)
	return acceptWords[strings.ToLower(strings.TrimSpace(strings.Trim(t, ".!")))] || acceptWords[t]
}

// ParseReply reads a free-text reply against the open questions. Forms understood, per line
// (several on a line, separated by a comma, semicolon, slash, "and" or a space: "q1: b, q2: a";
// nextAnswerRE), a question by its number when the rest is wholly an option ("1: b",
// "2. Semicolon"; numberedLineRE): "q2: b",
// "q2: 2", "q2 = B", "q2: <start of an option's text>" (case- and accent-insensitive prefix;
// an option's whole text wins over a longer option it begins); a reply of "ok"/"defaults"/👍
// (and translations), or with such a line of its own, accepts the defaults, unless the whole
// reply is the text of an option of the one open question ("Yes" to a Yes/No question). A
// reply to one open question may also name its option alone (matchWholeReply: "bug", "CSV
// please", "b)"). Lines that answer nothing are kept as FreeText, and so are lines whose
// answer comes with more words ("q1: b, and also a BOM"). A reply that answers one
// question leaves the others at their defaults. A reply with neither a choice nor Defaults
// (notes only, "A colleague knows, I'll ask her tomorrow") answers nothing: the round stays
// open. Quoted lines ("> …") and invisible characters (zero-width, emoji variation selectors
// and skin tones) are ignored.
func ParseReply(body string, qs []phase.Question) Answers {
	a := Answers{Choices: map[string]string{}}
	body = unquoted(cleanReply(body))
	if len(qs) == 1 {
		opt, ok := exactOption(qs[0], strings.TrimSpace(body))
		if !ok {
			opt, ok = exactOption(qs[0], trimAnswer(body))
		}
		if ok {
			a.Choices[qs[0].ID] = opt
			return a
		}
	}
	if isAccept(body) {
		a.Defaults = true
		return a
	}
	var free []string
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		if isAccept(line) {
			a.Defaults = true // "ok" on a line of its own, among notes
			continue
		}
		parts := splitAnswers(line, qs)
		var rest []string
		for _, part := range parts {
			if m := answerLineRE.FindStringSubmatch(part); m != nil {
				if q, ok := findQuestion(qs, strings.ToLower(m[1])); ok {
					if opt, whole, ok := matchOptionOf(q, m[2]); ok {
						a.Choices[q.ID] = opt
						if !whole {
							free = append(free, part) // "q1: b, and also a BOM": the rest is a note
						}
						continue
					}
				}
			} else if m := numberedLineRE.FindStringSubmatch(part); m != nil {
				// "1: b", "2. Semicolon": the question by its number, and an answer that is
				// wholly an option (a numbered note is not an answer).
				if n, ok := plainNumber(m[1]); ok && n >= 1 && n <= len(qs) {
					if opt, whole, ok := matchOptionOf(qs[n-1], m[2]); ok && whole {
						a.Choices[qs[n-1].ID] = opt
						continue
					}
				}
			}
			rest = append(rest, part)
		}
		if len(rest) == len(parts) {
			rest = []string{line} // no answer on the line: kept as written
		}
		for _, r := range rest {
			if strings.TrimSpace(r) != "" {
				free = append(free, r)
			}
		}
	}
	// A reply that names exactly one option of a single open question answers it ("bug",
	// "CSV please", "b)").
	if len(a.Choices) == 0 && len(qs) == 1 && len(free) == 1 {
		if opt, ok := matchWholeReply(qs[0], strings.TrimSpace(body)); ok {
			a.Choices[qs[0].ID] = opt
			if _, whole, _ := matchOptionOf(qs[0], body); whole {
				free = nil // the reply is the option: nothing else to hand on
			}
		}
	}
	a.FreeText = strings.TrimSpace(strings.Join(free, "\n"))
	return a
}

// splitAnswers cuts a line before each further answer it holds ("q1: b, q2: a" → "q1: b",
// "q2: a"); a line with one answer, or none, is returned whole.
func splitAnswers(line string, qs []phase.Question) []string {
	var parts []string
	for {
		// The earlier of the two cuts that hold: after punctuation or "and" (what is before it
		// is an answer), after a space (what is before it is a whole answer).
		loc := nextAnswerRE.FindStringSubmatchIndex(line)
		if loc != nil && answerLineRE.FindStringSubmatch(line[:loc[0]]) == nil {
			loc = nil
		}
		if sp := spacedAnswerRE.FindStringSubmatchIndex(line); sp != nil && wholeAnswer(line[:sp[0]], qs) &&
			(loc == nil || sp[0] < loc[0]) {
			loc = sp
		}
		if loc == nil {
			return append(parts, line)
		}
		parts = append(parts, line[:loc[0]])
		line = strings.TrimSpace(line[loc[2]:])
	}
}

// wholeAnswer reports whether s is an answer line whose answer is wholly an option ("q1: b").
func wholeAnswer(s string, qs []phase.Question) bool {
	m := answerLineRE.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	q, ok := findQuestion(qs, strings.ToLower(m[1]))
	if !ok {
		return false
	}
	_, whole, ok := matchOptionOf(q, m[2])
	return ok && whole
}

// trimAnswer drops what people end an answer with: emoji, punctuation and Markdown emphasis
// ("b 🙂", "b!", "**b**").
func trimAnswer(s string) string {
	s = strings.TrimRightFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return strings.TrimSpace(strings.Trim(strings.TrimSpace(s), "*`_.)"))
}

// exactOption resolves s, the whole of an answer, when it is an option's id or its whole text
// (case and accents ignored): "Yes" is the option "Yes", not "Yes, but behind a flag".
func exactOption(q phase.Question, s string) (string, bool) {
	ls := fold(s)
	if ls == "" {
		return "", false
	}
	for _, o := range q.Options {
		if fold(o.Label) == ls {
			return o.ID, true
		}
	}
	// The letter or number the block shows is the option's place, before the agent's own ids
	// (which may be "c" for the second option, or "0" and "1").
	if id, ok := shownOption(q, ls); ok {
		return id, true
	}
	for _, o := range q.Options {
		if fold(o.ID) == ls {
			return o.ID, true
		}
	}
	return "", false
}

// shownOption resolves a folded letter or number to the option the block shows under it ("b."
// is the second, "2" too), false for anything else.
func shownOption(q phase.Question, ls string) (string, bool) {
	if r := []rune(ls); len(r) == 1 && r[0] >= 'a' && int(r[0]-'a') < len(q.Options) {
		return q.Options[r[0]-'a'].ID, true
	}
	if n, ok := plainNumber(ls); ok && n >= 1 && n <= len(q.Options) {
		return q.Options[n-1].ID, true
	}
	return "", false
}

// plainNumber reads s when it is written in ASCII digits alone: "+1" (a thumbs-up), "-1" or
// "1e2" are not option numbers.
func plainNumber(s string) (int, bool) {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// matchWholeReply resolves a whole reply to the one open question without its "qN:" (an
// option's whole text, "Excel (xlsx)", ParseReply took already): its letter, number, id or the
// start of its text alone ("b", "2", "semi"); an option's whole text followed by more words ("CSV please", "Bug:
// the export is empty"); or a first word that names one option: its letter or number ("b
// please", "b) semicolon", "2 is fine") or the start of its text ("excel please", "keep it").
// A first word that is a word of one letter ("A colleague knows…", "I'll ask") is how a
// sentence starts, not an answer, unless punctuation follows it ("a) comma").
func matchWholeReply(q phase.Question, body string) (string, bool) {
	raw := strings.TrimSpace(body)
	s := trimAnswer(raw)
	if s == "" {
		return "", false
	}
	if len(strings.Fields(s)) == 1 {
		return matchOptionText(q, s, true)
	}
	lraw := fold(raw)
	best, bestLen := "", 0
	for _, o := range q.Options {
		if l := fold(o.Label); len(l) > bestLen && beginsWithWords(lraw, l, false) {
			best, bestLen = o.ID, len(l)
		}
	}
	if best != "" {
		return best, true
	}
	first := strings.Fields(s)[0]
	tok := strings.TrimRight(first, ").:,-")
	if tok == "" {
		return "", false
	}
	if isNumber(tok) && strings.ContainsAny(first[len(tok):], ".:=") {
		// "1: b", "1. Semicolon": the number of a question, as a numbered list writes it, not
		// an option's; what follows it did not name one option.
		return "", false
	}
	if utf8.RuneCountInString(tok) == 1 || isNumber(tok) {
		if tok == first && oneLetterWords[fold(tok)] {
			return "", false
		}
		return matchOptionText(q, tok, false)
	}
	return prefixOfOneLabel(q, tok)
}

// oneLetterWords are the letters that are words of their own in the languages replies come in
// (English "a", "I"; Spanish "y", "o"; Italian and Portuguese "e", "o"; French "à", "y"): a
// reply that begins with one is a sentence.
var oneLetterWords = map[string]bool{"a": true, "i": true, "o": true, "e": true, "y": true, "u": true}

func isNumber(s string) bool {
	_, ok := plainNumber(s)
	return ok
}

// prefixOfOneLabel resolves a word that begins exactly one option's text ("excel" of "Excel
// (xlsx)", "keep" of "Keep the old API"); a word an option's text only begins with ("tasks" for
// "task") is not one.
func prefixOfOneLabel(q phase.Question, word string) (string, bool) {
	w := fold(word)
	hit := ""
	for _, o := range q.Options {
		if strings.HasPrefix(fold(o.Label), w) {
			if hit != "" && hit != o.ID {
				return "", false
			}
			hit = o.ID
		}
	}
	return hit, hit != ""
}

func findQuestion(qs []phase.Question, id string) (phase.Question, bool) {
	for _, q := range qs {
		if strings.EqualFold(q.ID, id) {
			return q, true
		}
	}
	return phase.Question{}, false
}

// matchOptionOf is matchOption, and whole reports whether the answer is the option and nothing
// more ("b", "Semicolon", "semi"): false when more words follow it ("b, and also a BOM",
// "Semicolon please"), which are kept as a note for the agent.
func matchOptionOf(q phase.Question, s string) (id string, whole, ok bool) {
	t := trimAnswer(s)
	if id, ok := exactOption(q, t); ok {
		return id, true, true
	}
	id, ok = matchOption(q, s)
	return id, ok && len(strings.Fields(t)) == 1, ok
}

// matchOption resolves the answer of a "qN:" line, "b", "2", "B)", or the start of an option's
// label, to an option id.
func matchOption(q phase.Question, s string) (string, bool) {
	s = trimAnswer(s)
	if s == "" {
		return "", false
	}
	if id, ok := exactOption(q, s); ok {
		return id, true
	}
	if id, ok := matchOptionText(q, s, true); ok {
		return id, true
	}
	// "b please", "2 — the second one": the first word decides.
	if f := strings.Fields(s); len(f) > 1 {
		return matchOptionText(q, strings.Trim(f[0], "*`_.):,"), false)
	}
	return "", false
}

// matchOptionText resolves s to one option of q: its letter or number, its id, the start of
// its text ("semi"), or its text followed by more words (s of three characters or more:
// beginsWithWords; its plural only when s is the whole answer, not the first word of one).
// Two options matching is no match.
func matchOptionText(q phase.Question, s string, whole bool) (string, bool) {
	ls := fold(s)
	if id, ok := shownOption(q, ls); ok {
		return id, true
	}
	var hit string
	for _, o := range q.Options {
		if fold(o.ID) == ls || strings.HasPrefix(fold(o.Label), ls) || (len(ls) >= 3 && beginsWithWords(ls, fold(o.Label), whole)) {
			if hit != "" && hit != o.ID {
				return "", false // ambiguous
			}
			hit = o.ID
		}
	}
	return hit, hit != ""
}

// beginsWithWords reports whether s begins with label as words: label followed by the end or by
// a character that is neither a letter nor a digit ("yes, archived too"); next to a script
// written without spaces, by one more character at most, a particle ("分号吧", "是的",
// "Excelで"), not a longer word ("是否需要…"); with plural, by an "s" that ends the answer
// ("semicolons", a label of three letters or more). Any other longer word is another word
// ("yesterday" is not "yes", "not sure" not "no", "keeps breaking" not "keep").
func beginsWithWords(s, label string, plural bool) bool {
	if label == "" || !strings.HasPrefix(s, label) {
		return false
	}
	rest := s[len(label):]
	next, _ := utf8.DecodeRuneInString(rest)
	if rest == "" || !wordRune(next) {
		return true
	}
	word := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return !wordRune(r) }); i >= 0 {
		word = rest[:i]
	}
	if last, _ := utf8.DecodeLastRuneInString(label); unspaced(last) || unspaced(next) {
		return utf8.RuneCountInString(word) == 1
	}
	return plural && word == "s" && utf8.RuneCountInString(label) >= 3 &&
		strings.IndexFunc(rest[len(word):], wordRune) < 0
}

// wordRune reports whether r is part of a word: a letter or a digit.
func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// unspaced reports whether r is of a script written without spaces between words (Chinese,
// Japanese, Thai, Lao, Khmer, Myanmar, Tibetan).
func unspaced(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao,
		unicode.Khmer, unicode.Myanmar, unicode.Tibetan)
}

// stripMarks decomposes a text (NFD) and drops its combining marks: "Účetní" → "Ucetni",
// a decomposed "Zürich" → "Zurich". A chain keeps state: one per call.
func stripMarks() transform.Transformer {
	return transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
}

// unmarked are the Latin letters that are not a base letter and a combining mark, written as
// the letters a reader without them types.
var unmarked = strings.NewReplacer("ł", "l", "ø", "o", "đ", "d", "ħ", "h", "ı", "i", "ß", "ss", "æ", "ae", "œ", "oe", "þ", "th")

// fold lower-cases and strips accents so "Défaut" matches "defaut", "Łódź" "lodz"; white space
// becomes a plain space.
func fold(s string) string {
	out, _, err := transform.String(stripMarks(), strings.ToLower(s))
	if err != nil {
		out = strings.ToLower(s)
	}
	out = unmarked.Replace(out)
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		return narrow(r)
	}, out)
}

var checkboxRE = regexp.MustCompile(`^\s*[-*]\s*\[([ xX])\]\s*\*\*([a-z])\.`)
var headingRE = regexp.MustCompile(`^###\s+(q\d+)\.`)

// tickedLetters reads a question block: the option letters ticked under each question's
// heading.
func tickedLetters(body string) map[string][]string {
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
	return ticked
}

// tickState reads the choice each question of a question block shows: the option ticked
// alone (the default too), or, of two ticked where one is the pre-ticked default, the other; a
// question with no box ticked, or with another set of boxes, has none.
func tickState(body string, qs []phase.Question) map[string]string {
	ticked := tickedLetters(body)
	out := map[string]string{}
	for _, q := range qs {
		var ids []string
		for _, letter := range ticked[q.ID] {
			if i := int(letter[0] - 'a'); i >= 0 && i < len(q.Options) {
				ids = append(ids, q.Options[i].ID)
			}
		}
		switch {
		case len(ids) == 1:
			out[q.ID] = ids[0]
		case len(ids) == 2 && ids[0] == q.Default:
			out[q.ID] = ids[1]
		case len(ids) == 2 && ids[1] == q.Default:
			out[q.ID] = ids[0]
		}
	}
	return out
}

// renderedTicks is the tickState of a block as Alfred renders it: every default ticked alone.
func renderedTicks(qs []phase.Question) map[string]string {
	out := map[string]string{}
	for _, q := range qs {
		out[q.ID] = q.Default
	}
	return out
}

// ParseTicks reads the checkboxes of an edited question block. For each question with exactly
// one ticked box, or with two where one is the pre-ticked default, it returns the chosen option.
// Questions left as rendered are not returned (they keep their default).
func ParseTicks(body string, qs []phase.Question) map[string]string {
	out := tickState(body, qs)
	for _, q := range qs {
		if out[q.ID] == q.Default {
			delete(out, q.ID) // left as rendered: the default stays
		}
	}
	return out
}
