package mailbox

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./mailbox -update to create %s", path)
	require.Equal(t, string(want), got)
}

func sampleQuestions() []phase.Question {
	return []phase.Question{
		{ID: "q1", Title: "Which format?", Context: "The report is a table.", Default: "a", Options: []phase.Option{
			{ID: "a", Label: "CSV", Description: "comma separated, opens in any spreadsheet"},
			{ID: "b", Label: "Excel (xlsx)", Description: "one workbook with a sheet per month"},
		}},
		{ID: "q2", Title: "Which months?", Default: "b", Options: []phase.Option{
			{ID: "a", Label: "Current month only", Description: "the month being viewed"},
			{ID: "b", Label: "Every month", Description: "the whole history"},
			{ID: "c", Label: "Défaut régional", Description: "per region"},
		}},
	}
}

func TestRenderQuestionsGolden(t *testing.T) {
	t.Parallel()
	got := RenderQuestions("I have two questions.", sampleQuestions(), time.Date(2026, 11, 30, 9, 5, 0, 0, time.FixedZone("CET", 3600)))
	require.Contains(t, got, "2026-11-30 08:05 UTC")
	golden(t, "questions.md", got)
}

func TestRenderAnsweredGolden(t *testing.T) {
	t.Parallel()
	got := RenderAnswered("I have two questions.", sampleQuestions(), map[string]string{"q1": "b", "q2": "b"},
		"Answered by @alice.")
	golden(t, "questions_answered.md", got)
}

func TestParseReply(t *testing.T) {
	t.Parallel()
	qs := sampleQuestions()
	for _, tc := range []struct {
		body     string
		choices  map[string]string
		defaults bool
		free     string
	}{
		{body: "q2: b", choices: map[string]string{"q2": "b"}},
		{body: "q2: b 🙂", choices: map[string]string{"q2": "b"}},
		{body: "q1: b please!", choices: map[string]string{"q1": "b"}, free: "q1: b please!"},
		{body: "q1: 2", choices: map[string]string{"q1": "b"}},
		{body: "Q1 = B\nq2: a", choices: map[string]string{"q1": "b", "q2": "a"}},
		{body: "q1: excel", choices: map[string]string{"q1": "b"}},
		{body: "q2: defaut", choices: map[string]string{"q2": "c"}},
		{body: "**q1**: csv please", choices: map[string]string{"q1": "a"}, free: "**q1**: csv please"},
		{body: "ok", defaults: true, choices: map[string]string{}},
		{body: "Defaults.", defaults: true, choices: map[string]string{}},
		{body: "👍", defaults: true, choices: map[string]string{}},
		{body: "d'accord", defaults: true, choices: map[string]string{}},
		{body: "Please also keep the header row 🙂", choices: map[string]string{}, free: "Please also keep the header row 🙂"},
		{body: "I'll look at this tomorrow", choices: map[string]string{}, free: "I'll look at this tomorrow"},
		{body: "ok\nPlease also keep the header row", defaults: true, choices: map[string]string{}, free: "Please also keep the header row"},
		{body: "Looks fine to me.\n👍", defaults: true, choices: map[string]string{}, free: "Looks fine to me."},
		{body: "q1: b\nAnd use semicolons", choices: map[string]string{"q1": "b"}, free: "And use semicolons"},
		{body: "q3: a", choices: map[string]string{}, free: "q3: a"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			a := ParseReply(tc.body, qs)
			require.Equal(t, tc.choices, a.Choices)
			require.Equal(t, tc.defaults, a.Defaults)
			require.Equal(t, tc.free, a.FreeText)
		})
	}
}

func TestParseReplyTypeQuestion(t *testing.T) {
	t.Parallel()
	qs := []phase.Question{TypeQuestion()}
	require.Equal(t, map[string]string{"q1": "bug"}, ParseReply("bug", qs).Choices)
	require.Equal(t, map[string]string{"q1": "task"}, ParseReply("q1: a", qs).Choices)
	require.Equal(t, map[string]string{"q1": "question"}, ParseReply("Question", qs).Choices)
}

func TestParseTicks(t *testing.T) {
	t.Parallel()
	qs := sampleQuestions()
	body := RenderQuestions("intro", qs, time.Now())
	require.Empty(t, ParseTicks(body, qs), "untouched block keeps defaults")

	// The human ticks b of q1 and leaves the default ticked too; unticks q2's default and ticks c.
	edited := replaceOnce(body, "- [ ] **b. Excel", "- [x] **b. Excel")
	edited = replaceOnce(edited, "- [x] **b. Every month", "- [ ] **b. Every month")
	edited = replaceOnce(edited, "- [ ] **c. Défaut", "- [X] **c. Défaut")
	require.Equal(t, map[string]string{"q1": "b", "q2": "c"}, ParseTicks(edited, qs))
}

func replaceOnce(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("not found: " + old)
	}
	return strings.Replace(s, old, new, 1)
}

// TestParseReplyEdges: replies as people write them, at the edges where an answer and notes
// look alike (a review's findings; each case failed before its fix).
func TestParseReplyEdges(t *testing.T) {
	t.Parallel()
	typ := []phase.Question{TypeQuestion()}
	sep := []phase.Question{sampleQuestions()[0]}
	yesNo := []phase.Question{{ID: "q1", Title: "Include archived reports?", Default: "b",
		Options: []phase.Option{{ID: "a", Label: "Yes"}, {ID: "b", Label: "No"}}}}
	prefixes := []phase.Question{{ID: "q1", Title: "Ship it?", Default: "b",
		Options: []phase.Option{{ID: "a", Label: "Yes"}, {ID: "b", Label: "Yes, but behind a flag"}}}}
	two := sampleQuestions()
	words := []phase.Question{{ID: "q1", Title: "Separator or format?", Default: "a", Options: []phase.Option{
		{ID: "a", Label: "Comma"}, {ID: "b", Label: "Semicolon"}, {ID: "c", Label: "Excel"}}}}
	keep := []phase.Question{{ID: "q1", Title: "The old endpoint?", Default: "a", Options: []phase.Option{
		{ID: "a", Label: "Keep"}, {ID: "b", Label: "Drop"}}}}
	zhYesNo := []phase.Question{{ID: "q1", Title: "需要兼容旧格式吗?", Default: "b", Options: []phase.Option{
		{ID: "a", Label: "是"}, {ID: "b", Label: "否"}}}}
	zhGood := []phase.Question{{ID: "q1", Title: "这样可以吗?", Default: "a", Options: []phase.Option{
		{ID: "a", Label: "好"}, {ID: "b", Label: "不好"}}}}
	chinese := []phase.Question{{ID: "q1", Title: "分隔符?", Default: "a", Options: []phase.Option{
		{ID: "a", Label: "逗号"}, {ID: "b", Label: "分号"}}}}
	places := []phase.Question{{ID: "q1", Title: "Which office?", Default: "a", Options: []phase.Option{
		{ID: "a", Label: "Zurich"}, {ID: "b", Label: "Łódź"}, {ID: "c", Label: "Účetní oddělení"}}}}
	for _, tc := range []struct {
		name     string
		qs       []phase.Question
		body     string
		choices  map[string]string
		defaults bool
	}{
		// Notes only answer nothing, though they begin with an article or an option's text.
		{"notes starting with the article A", sep, "A colleague in finance knows, I'll ask her tomorrow.", map[string]string{}, false},
		{"notes starting with a longer word", typ, "Tasks like this need the PO, I'll check with her tomorrow", map[string]string{}, false},
		// One open question: its option alone, or its whole text then more words, answers it.
		{"an option's text then more words", typ, "Bug: the export is empty", map[string]string{"q1": "bug"}, false},
		{"a letter then punctuation", sep, "b) semicolon", map[string]string{"q1": "b"}, false},
		{"a letter alone", sep, "b", map[string]string{"q1": "b"}, false},
		// The letter the block shows is the option's place, whatever ids the agent gave.
		{"a shown letter over an agent's id", []phase.Question{{ID: "q1", Title: "Separator?", Default: "a", Options: []phase.Option{
			{ID: "a", Label: "Comma"}, {ID: "c", Label: "Semicolon"}, {ID: "d", Label: "Tab"}}}}, "q1: c", map[string]string{"q1": "d"}, false},
		{"a shown number over an agent's id", []phase.Question{{ID: "q1", Title: "Separator?", Default: "0", Options: []phase.Option{
			{ID: "0", Label: "Comma"}, {ID: "1", Label: "Semicolon"}}}}, "1", map[string]string{"q1": "0"}, false},
		// Typed with a Chinese or Japanese keyboard: full-width punctuation, letters and digits.
		{"a full-width colon", two, "q1：b", map[string]string{"q1": "b"}, false},
		{"full-width everything", two, "ｑ１：ｂ，ｑ２：ａ", map[string]string{"q1": "b", "q2": "a"}, false},
		{"a full-width letter alone", sep, "ｂ", map[string]string{"q1": "b"}, false},
		{"an ordered list's number before the answer", typ, "1. q1: b", map[string]string{"q1": "bug"}, false},
		// A letter, number or the start of an option's text, then more words (a review of the
		// first version of this table).
		{"a letter then words", sep, "b please", map[string]string{"q1": "b"}, false},
		{"a number then words", sep, "2 is fine", map[string]string{"q1": "b"}, false},
		{"a letter, a dash and the option", sep, "b - Excel", map[string]string{"q1": "b"}, false},
		{"the start of an option's text then words", sep, "excel please", map[string]string{"q1": "b"}, false},
		{"an option's whole text ending in a parenthesis", sep, "Excel (xlsx)", map[string]string{"q1": "b"}, false},
		{"I starts a sentence", sep, "I'll check with finance", map[string]string{}, false},
		// An option's whole text is that option, not an accept word.
		{"Yes to a Yes/No question", yesNo, "Yes", map[string]string{"q1": "a"}, false},
		{"y still accepts the defaults", yesNo, "y", map[string]string{}, true},
		// An option's whole text wins over a longer option it begins.
		{"the shorter of two options", prefixes, "q1: Yes", map[string]string{"q1": "a"}, false},
		{"the longer of two options", prefixes, "q1: Yes, but behind a flag", map[string]string{"q1": "b"}, false},
		{"the longer one alone", prefixes, "Yes, but behind a flag", map[string]string{"q1": "b"}, false},
		// A word that only begins with an option's text is another word: "Yesterday" is not
		// "Yes", "Nothing" not "No", alone or after "q1:".
		{"a longer word alone", yesNo, "Yesterday", map[string]string{}, false},
		{"a longer word after q1", yesNo, "q1: Nothing of the sort, ask finance", map[string]string{}, false},
		{"a longer word then words after q1", yesNo, "q1: Yesterday's format", map[string]string{}, false},
		{"an option's text, then a comma, after q1", yesNo, "q1: Yes, archived too", map[string]string{"q1": "a"}, false},
		{"not sure is not no", yesNo, "q1: Not sure, ask finance", map[string]string{}, false},
		// A plural is the option; so is its text in a script written without spaces.
		{"a plural alone", words, "Semicolons", map[string]string{"q1": "b"}, false},
		{"a plural after q1", words, "q1: semicolons", map[string]string{"q1": "b"}, false},
		{"a plural then more words is notes", words, "q1: semicolons please", map[string]string{}, false},
		{"a verb in s is not the option", keep, "q1: keeps breaking, ask ops", map[string]string{}, false},
		{"a short label and an s", yesNo, "q1: nos da igual", map[string]string{}, false},
		{"Chinese particle after the option", chinese, "分号吧", map[string]string{"q1": "b"}, false},
		{"Chinese particle after q1", chinese, "q1: 分号吧", map[string]string{"q1": "b"}, false},
		{"Chinese yes with a particle", zhYesNo, "是的", map[string]string{"q1": "a"}, false},
		{"a Chinese question back is notes", zhYesNo, "是否需要同时支持旧格式？", map[string]string{}, false},
		{"a Chinese question back after q1", zhYesNo, "q1: 是否需要同时支持旧格式？", map[string]string{}, false},
		{"a Chinese longer word is notes", zhGood, "好像不太对，我再确认一下", map[string]string{}, false},
		{"Japanese particle after a Latin option", words, "Excelで", map[string]string{"q1": "c"}, false},
		// Quoted lines are what the reply answers, not the replier's words.
		{"a quoted answer", two, "> q1: a\nq1: b", map[string]string{"q1": "b"}, false},
		// Two answers on one line.
		{"two answers on a line", two, "q1: b, q2: a", map[string]string{"q1": "b", "q2": "a"}, false},
		{"two answers and a semicolon", two, "q1: b; q2: c", map[string]string{"q1": "b", "q2": "c"}, false},
		{"two answers with dashes", two, "q1 - b, q2 - c", map[string]string{"q1": "b", "q2": "c"}, false},
		{"two answers and and", two, "q1: b and q2: c", map[string]string{"q1": "b", "q2": "c"}, false},
		{"two answers and a slash", two, "q1: b / q2: c", map[string]string{"q1": "b", "q2": "c"}, false},
		{"two answers and a space", two, "q1: b q2: c", map[string]string{"q1": "b", "q2": "c"}, false},
		// A question named by its number, as a numbered list writes it; +1 is a thumbs-up.
		{"a numbered answer", typ, "1: b", map[string]string{"q1": "bug"}, false},
		{"a numbered list's answer", sep, "1. Excel", map[string]string{"q1": "b"}, false},
		{"numbered answers to two questions", two, "1: b\n2: c", map[string]string{"q1": "b", "q2": "c"}, false},
		{"a numbered note is notes", sep, "1. The totals row should stay", map[string]string{}, false},
		{"+1 accepts the defaults", typ, "+1", map[string]string{}, true},
		{"thumbs up as a shortcode", sep, ":thumbsup:", map[string]string{}, true},
		{"+1 as a shortcode", sep, ":+1:", map[string]string{}, true},
		{"agreed in German", sep, "Einverstanden.", map[string]string{}, true},
		// Accept words as phones and keyboards write them.
		{"thumbs up with a skin tone", sep, "👍🏽", map[string]string{}, true},
		{"thumbs up with a variation selector", sep, "👍\uFE0F", map[string]string{}, true},
		{"a typographic apostrophe", sep, "D’accord", map[string]string{}, true},
		{"a zero-width space", sep, "ok\u200b", map[string]string{}, true},
		// Accents ignored beyond the Latin-1 letters.
		{"a stroke", places, "q1: lodz", map[string]string{"q1": "b"}, false},
		{"a caron", places, "q1: ucetni", map[string]string{"q1": "c"}, false},
		{"a decomposed umlaut", places, "q1: Zu\u0308rich", map[string]string{"q1": "a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ParseReply(tc.body, tc.qs)
			require.Equal(t, tc.choices, a.Choices)
			require.Equal(t, tc.defaults, a.Defaults)
		})
	}
}

// TestDeadlineNeverSaidEarlier: a deadline on the minute is said to the minute; one within the
// minute (a deadline under a minute) to the second, rounded up, never earlier than the real
// one; the rebuild reads either back.
func TestDeadlineNeverSaidEarlier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		at   time.Time
		said string
		back time.Time
	}{
		{time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC), "2026-11-30 10:01 UTC", time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC)},
		{time.Date(2026, 11, 30, 10, 1, 15, 0, time.UTC), "2026-11-30 10:01:15 UTC", time.Date(2026, 11, 30, 10, 1, 15, 0, time.UTC)},
		{time.Date(2026, 11, 30, 10, 1, 15, 300, time.UTC), "2026-11-30 10:01:16 UTC", time.Date(2026, 11, 30, 10, 1, 16, 0, time.UTC)},
		{time.Date(2026, 11, 30, 10, 0, 59, 1, time.UTC), "2026-11-30 10:01 UTC", time.Date(2026, 11, 30, 10, 1, 0, 0, time.UTC)},
	} {
		require.Equal(t, tc.said, deadlineText(tc.at))
		body := RenderQuestions("intro", sampleQuestions(), tc.at)
		require.Contains(t, body, "Without an answer by "+tc.said+", I will apply the defaults.")
		p, err := parseBlock(body)
		require.NoError(t, err)
		require.True(t, p.open)
		require.Equal(t, tc.back, p.deadline, tc.said)
		require.False(t, p.deadline.Before(tc.at), "never earlier than the real deadline")
	}
}
