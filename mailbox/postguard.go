package mailbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Default post limits, in bytes, per forge kind (spec/edge.md, "What Alfred posts"). GitLab
// caps a note and a description at 1,000,000 characters (its API answers 400 beyond); a byte
// cap of the same number is never more than that. Gitea and Forgejo on MySQL keep comments and
// descriptions in TEXT columns of 65,535 bytes; 65,000 leaves room for what the forge adds.
const (
	DefaultGitLabMaxBytes  = 1_000_000
	DefaultForgejoMaxBytes = 65_000
)

// ErrPostRefused wraps a post the forge refused with a 4xx (forge.ErrRefused, ErrConflict,
// ErrForbidden): sending it again cannot succeed, so the mailbox blocks with the reason instead
// of retrying.
var ErrPostRefused = errors.New("mailbox: the forge refused the post")

// PostLimits bounds the texts Alfred sends to one forge, in bytes. Zero means the kind's
// default (DefaultGitLabMaxBytes, DefaultForgejoMaxBytes).
type PostLimits struct {
	// MaxCommentBytes caps one comment; a longer one is split into marked parts.
	MaxCommentBytes int
	// MaxDescriptionBytes caps an issue or merge request description: a longer merge request
	// description is cut, with a notice; a longer issue description is not sent
	// (ErrDescriptionTooLong), as it holds the human's text.
	MaxDescriptionBytes int
}

// WithDefaults fills the zero limits with kind's defaults.
func (l PostLimits) WithDefaults(kind forge.Kind) PostLimits {
	def := DefaultForgejoMaxBytes
	if kind == forge.KindGitLab {
		def = DefaultGitLabMaxBytes
	}
	if l.MaxCommentBytes <= 0 {
		l.MaxCommentBytes = def
	}
	if l.MaxDescriptionBytes <= 0 {
		l.MaxDescriptionBytes = def
	}
	return l
}

// minPostBytes is the smallest limit GuardPosts works with: room for a marker, a part notice
// and some text.
const minPostBytes = 1024

// PostGuard configures GuardPosts.
type PostGuard struct {
	// Censor removes secrets from every text (nil: none).
	Censor func(string) string
	// Limits bounds the texts.
	Limits PostLimits
	// IsBot reports whether a login is a bot (the bot itself, the configured other bots,
	// forge.IsBotLogin); an "@login" of a bot is written as code, which notifies nobody. Nil:
	// forge.IsBotLogin of the forge's kind only.
	IsBot func(login string) bool
}

// GuardPosts wraps f so that every text Alfred sends through it (comments, edits, issue and
// merge request descriptions and titles) passes the censor, mentions no bot and nobody en
// masse ("@all"), shows no image (inertImages) and stays within the limits (guardText), and a
// post the forge refuses with a 4xx returns an error wrapping ErrPostRefused.
// An issue description is the human's text with Alfred's sections: only the sections are
// cleaned, and one over the limit is not sent (ErrDescriptionTooLong).
// When f has the review calls (forge.Reviews), so does the result: replies and reviews are
// cleaned the same way. When f has the merge calls (forge.Merger), so does the result: they
// post no text and are f's, so a refused merge is the forge's error as it is (not
// ErrPostRefused). The other methods are f's.
//
// A comment over MaxCommentBytes is split at rune (and, where one is near, line) boundaries into
// parts. The first part keeps the comment's own marker and is the comment the mailbox records;
// part k (k ≥ 2) is a comment of its own with the marker key "<key>.part-k", found by that
// marker and edited in place like any bot comment, so a retried post creates no duplicate. A
// part an edit no longer needs says so. A merge request description over MaxDescriptionBytes is
// cut at a rune boundary with a notice, keeping the end markers of the sections it cuts into.
func GuardPosts(f forge.Forge, g PostGuard) forge.Forge {
	censor := g.Censor
	if censor == nil {
		censor = func(s string) string { return s }
	}
	isBot := g.IsBot
	if isBot == nil {
		isBot = func(login string) bool { return forge.IsBotLogin(f.Kind(), 0, login) }
	}
	limits := g.Limits.WithDefaults(f.Kind())
	limits.MaxCommentBytes = max(limits.MaxCommentBytes, minPostBytes)
	limits.MaxDescriptionBytes = max(limits.MaxDescriptionBytes, minPostBytes)
	title := func(s string) string { return quoteBotMentions(censor(s), isBot) }
	escape := func(s string) string { return s }
	if f.Kind() == forge.KindGitLab {
		escape = escapeQuickActions
	}
	kind := f.Kind()
	clean := func(s string) string { return guardText(kind, isBot, censor(s)) }
	gf := &guardedForge{Forge: f, limits: limits, clean: clean, title: title, escape: escape}
	var rv forge.Reviews
	if r, ok := f.(forge.Reviews); ok {
		rv = &guardedReviews{rv: r, clean: gf.clean}
	}
	mg, _ := f.(forge.Merger)
	return withOptional(gf, rv, mg)
}

type guardedForge struct {
	forge.Forge
	// clean censors a text, quotes its bot mentions and, on GitLab, escapes its quick actions;
	// title does the first two, for a title (GitLab reads no quick action in one); escape is the
	// last alone, applied again to each part of a split comment and to a cut description, whose
	// new line starts clean did not see.
	clean, title, escape func(string) string
	limits               PostLimits
}

// escapeQuickActions puts a space before each line GitLab would run as a quick action ("/" at
// the start of a line, then a letter: "/merge", "/approve", "/label ~x"), so that GitLab runs
// nothing: GitLab runs the quick actions of a note, and of a description when it is created or
// changed, as the account that posts it, the bot, with its rights (GitLab's
// Gitlab::QuickActions::Extractor, lib/gitlab/quick_actions/extractor.rb, matches `^\/(?<cmd>…)`
// in the text with every carriage return deleted first, and allows no space before the slash).
// Text Alfred posts carries what an agent or a human wrote, so none of it may command. Every
// such line is escaped, in a code block too (GitLab's own skipping of fenced, HTML and quoted
// blocks is not relied on: a cut or a split can open or close one); Markdown drops the space
// of a paragraph's line, and a code block shows it. The text is otherwise kept byte for byte,
// and escaping twice changes nothing.
func escapeQuickActions(s string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		c := l
		if strings.Contains(c, "\r") {
			c = strings.ReplaceAll(c, "\r", "")
		}
		if len(c) > 1 && c[0] == '/' && isASCIILetter(c[1]) {
			lines[i] = " " + l
		}
	}
	return strings.Join(lines, "\n")
}

func isASCIILetter(b byte) bool { return 'a' <= b|0x20 && b|0x20 <= 'z' }

// mentionRE matches an @-mention: "@" at the start or after a character that cannot be part of
// an e-mail address or code, then a login (letters, digits, '_', '-', '.', an optional "[bot]").
var mentionRE = regexp.MustCompile("(^|[^A-Za-z0-9_`.@-])@([A-Za-z0-9][A-Za-z0-9_.-]*(?:\\[bot\\])?)")

// massMentions are the logins that mention many people at once: GitLab's "@all" notifies every
// member of the project (GitLab docs, "GitLab Flavored Markdown", "Special GitLab references").
// Alfred posts as a member, and its texts carry what agents and others wrote.
var massMentions = map[string]bool{"all": true}

// quoteBotMentions writes every "@login" of a bot, and every mass mention ("@all"), as
// "`@login`": code, which notifies nobody.
func quoteBotMentions(s string, isBot func(string) bool) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return mentionRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := mentionRE.FindStringSubmatch(m)
		login := strings.TrimRight(sub[2], ".-")
		if !isBot(login) && !massMentions[strings.ToLower(login)] {
			return m
		}
		return sub[1] + "`@" + login + "`" + sub[2][len(login):]
	})
}

// guardText is what the post guard makes of a censored text before it sends it: its bot and
// mass mentions quoted, its images inert and, on GitLab, its quick actions escaped. Each step
// is idempotent, so the machine applies it too to a comment it posts (Machine.post), and the
// hash it records is that of the text the forge holds.
func guardText(kind forge.Kind, isBot func(string) bool, s string) string {
	s = inertImages(quoteBotMentions(s, isBot))
	if kind == forge.KindGitLab {
		s = escapeQuickActions(s)
	}
	return s
}

// imageTagRE matches the start of an HTML element a browser fetches a URL for when the forge
// shows it (GitLab and Forgejo keep <img>, <picture>, <video> and <audio> of a text's HTML).
var imageTagRE = regexp.MustCompile(`(?i)<(img|picture|source|video|audio|image|svg|object|embed|iframe|input)([\s/>]|$)`)

// inertImages makes the images of a text Alfred posts inert: "![" is written "!\[" (Markdown
// shows "![alt](url)" as text, the URL a plain link) and the start of an HTML element that
// loads a URL ("<img", "<video"…) "&lt;img". A browser showing the comment fetches an image's
// URL unasked (neither GitLab nor Forgejo proxies images by default), so an image an agent
// writes would carry what it puts in the URL to any host, past the run's egress allowlist
// (spec/security.md). Alfred's own texts hold no image. In a code span or block the escape
// shows as written; escaping twice changes nothing.
func inertImages(s string) string {
	if strings.Contains(s, "![") {
		s = strings.ReplaceAll(s, "![", "!\\[")
	}
	if strings.Contains(s, "<") {
		s = imageTagRE.ReplaceAllString(s, "&lt;$1$2")
	}
	return s
}

// refusedByForge reports a call the forge refused for a reason of its own (a 4xx answer:
// forge.ErrRefused, ErrConflict, ErrForbidden), which sending it again cannot change: a post
// (ErrPostRefused) or a merge (the auto-merge refusal).
func refusedByForge(err error) bool {
	return errors.Is(err, forge.ErrRefused) || errors.Is(err, forge.ErrConflict) || errors.Is(err, forge.ErrForbidden)
}

func refused(op string, err error) error {
	if refusedByForge(err) {
		return fmt.Errorf("%w: %s: %w", ErrPostRefused, op, err)
	}
	return err
}

// SetIssueBody cleans Alfred's sections of body (cleanSections) and writes it, or returns
// ErrDescriptionTooLong, sending nothing, when the result is over MaxDescriptionBytes: an issue
// description holds the human's text, which is never cut.
func (g *guardedForge) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	// On GitLab the whole body is escaped, the human's text too: GitLab runs the quick actions
	// of a changed description as the account that sends it, and keeps in the text those its
	// writer had no right to run, which the bot has.
	body = g.escape(cleanSections(body, g.clean))
	if len(body) > g.limits.MaxDescriptionBytes {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrDescriptionTooLong, len(body), g.limits.MaxDescriptionBytes)
	}
	return refused("write the issue description", g.Forge.SetIssueBody(ctx, ref, body))
}

// cleanSections applies clean to the content of every Alfred section of an issue description
// (between "<!-- alfred:section=NAME:start -->" and its end marker) and keeps the rest, the
// human's text, byte for byte: it is the forge's already, and censoring or quoting it would
// change what a human wrote.
func cleanSections(body string, clean func(string) string) string {
	var b strings.Builder
	rest := body
	for {
		i := strings.Index(rest, sectionOpen)
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], markerClose)
		if j < 0 {
			break
		}
		marker := rest[i : i+j+len(markerClose)]
		name, ok := strings.CutSuffix(strings.TrimPrefix(marker, sectionOpen), sectionStartClose)
		if !ok {
			b.WriteString(rest[:i+len(marker)])
			rest = rest[i+len(marker):]
			continue
		}
		_, end := sectionMarkers(name)
		k := strings.Index(rest[i+len(marker):], end)
		if k < 0 {
			// A start without its end (text that forged one): not a section; the sections
			// after it are still cleaned.
			b.WriteString(rest[:i+len(marker)])
			rest = rest[i+len(marker):]
			continue
		}
		b.WriteString(rest[:i+len(marker)])
		b.WriteString(clean(rest[i+len(marker) : i+len(marker)+k]))
		b.WriteString(end)
		rest = rest[i+len(marker)+k+len(end):]
	}
	b.WriteString(rest)
	return b.String()
}

func (g *guardedForge) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	mr.Title = cutRunes(g.title(mr.Title), 255) // GitLab and Gitea cap titles at 255 characters
	mr.Body = g.escape(CutDescription(g.clean(mr.Body), g.limits.MaxDescriptionBytes))
	out, err := g.Forge.CreateMergeRequest(ctx, repo, mr)
	return out, refused("open the merge request", err)
}

func (g *guardedForge) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	parts := g.split(body)
	id, err := g.Forge.Comment(ctx, ref, parts[0])
	if err != nil {
		return 0, refused("post a comment", err)
	}
	if len(parts) == 1 { // a new comment that fits has no parts to look for
		return id, nil
	}
	return id, g.syncParts(ctx, ref, body, parts)
}

func (g *guardedForge) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	parts := g.split(body)
	if err := g.Forge.EditComment(ctx, ref, id, parts[0]); err != nil {
		return refused("edit a comment", err)
	}
	return g.syncParts(ctx, ref, body, parts)
}

// split cleans body and splits it into the comments that carry it (SplitComment), each part
// escaped again: a split inside a line starts a new one.
func (g *guardedForge) split(body string) []string {
	parts := SplitComment(g.clean(body), g.limits.MaxCommentBytes-1) // room for one escape
	for i := range parts {
		parts[i] = g.escape(parts[i])
	}
	return parts
}

// syncParts posts or edits parts 2… of a comment, found by their markers, and marks the parts
// an earlier, longer version left as no longer used (an edit lists the comments once for
// that). A comment without marker has no parts.
func (g *guardedForge) syncParts(ctx context.Context, ref forge.IssueRef, body string, parts []string) error {
	key, kind, ok := ParseMarker(firstLine(body))
	if !ok {
		return nil
	}
	existing, err := g.partComments(ctx, ref, key)
	if err != nil {
		return err
	}
	if len(parts) == 1 && len(existing) == 0 {
		return nil
	}
	for k := 2; k <= max(len(parts), maxKey(existing)); k++ {
		text := Marker(partKey(key, k), kind) + "\n*(This part is no longer used.)*"
		if k <= len(parts) {
			text = parts[k-1]
		}
		if c, ok := existing[k]; ok {
			if c.Body != text {
				if err := g.Forge.EditComment(ctx, ref, c.ID, text); err != nil {
					return refused("edit a comment part", err)
				}
			}
			continue
		}
		if k > len(parts) {
			continue
		}
		if _, err := g.Forge.Comment(ctx, ref, text); err != nil {
			return refused("post a comment part", err)
		}
	}
	return nil
}

// partComments returns the bot's comments that are parts of the comment key, by part number.
func (g *guardedForge) partComments(ctx context.Context, ref forge.IssueRef, key string) (map[int]forge.Comment, error) {
	me, err := g.Forge.BotUser(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the bot account: %w", err)
	}
	cs, err := g.Forge.Comments(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("list comments: %w", err)
	}
	out := map[int]forge.Comment{}
	prefix := key + ".part-"
	for _, c := range cs {
		k, _, ok := ParseMarker(c.Body)
		if !ok || !strings.EqualFold(c.Author.Login, me.Login) || !strings.HasPrefix(k, prefix) {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(k[len(prefix):], "%d", &n); err == nil && n >= 2 {
			if _, dup := out[n]; !dup {
				out[n] = c
			}
		}
	}
	return out, nil
}

func maxKey(m map[int]forge.Comment) int {
	n := 0
	for k := range m {
		n = max(n, k)
	}
	return n
}

func partKey(key string, k int) string { return fmt.Sprintf("%s.part-%d", key, k) }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// partNoticeBytes bounds the notice and marker a part adds to its text.
const partNoticeBytes = 200

// SplitComment returns body as it is when it fits in max bytes, else in parts of at most max
// bytes each: part 1 keeps body's marker (its first line) and part k carries the marker
// "<key>.part-k"; every part says "(part k of n)". A body without a marker is cut
// (CutDescription) instead. Cuts fall on rune boundaries, at the last
// line break of the window when there is one in its second half.
func SplitComment(body string, max int) []string {
	if len(body) <= max {
		return []string{body}
	}
	key, kind, marked := ParseMarker(firstLine(body))
	if !marked { // parts without a marker could not be found again: cut instead
		return []string{CutDescription(body, max)}
	}
	_, text, _ := strings.Cut(body, "\n")
	room := max - partNoticeBytes - len(key) - len(kind)
	if room < minPostBytes/2 { // a marker that long leaves no room: cut instead
		return []string{CutDescription(body, max)}
	}
	var chunks []string
	for len(text) > 0 {
		n := min(room, len(text))
		if n < len(text) {
			if c := runeCut(text, n); c > 0 { // 0: no rune start in the window (invalid UTF-8)
				n = c
			}
			if i := strings.LastIndexByte(text[:n], '\n'); i > n/2 {
				n = i + 1
			}
		}
		chunks = append(chunks, text[:n])
		text = text[n:]
	}
	parts := make([]string, len(chunks))
	for i, c := range chunks {
		notice := fmt.Sprintf("*(part %d of %d)*\n\n", i+1, len(chunks))
		switch {
		case i == 0:
			parts[i] = Marker(key, kind) + "\n" + notice + c
		default:
			parts[i] = Marker(partKey(key, i+1), kind) + "\n" + notice + c
		}
	}
	return parts
}

// CutDescription returns body when it fits in max bytes, else body cut at a rune boundary with
// a notice, and with the end markers of the Alfred sections the cut falls into, so the sections
// stay readable (Section) and replaceable (SetSection).
func CutDescription(body string, max int) string {
	if len(body) <= max {
		return body
	}
	const notice = "\n\n*(Cut here: the full text is longer than this forge accepts in a description.)*\n"
	cut := runeCut(body, max-len(notice)-256)
	var open []string
	for rest, off := body[:cut], 0; ; {
		i := strings.Index(rest[off:], sectionOpen)
		if i < 0 {
			break
		}
		off += i
		j := strings.Index(rest[off:], markerClose)
		if j < 0 {
			cut = off // a marker cut in half is dropped
			break
		}
		name, edge, _ := strings.Cut(strings.TrimPrefix(rest[off:off+j], sectionOpen), ":")
		switch edge {
		case "start":
			open = append(open, name)
		case "end":
			if n := len(open); n > 0 && open[n-1] == name {
				open = open[:n-1]
			}
		}
		off += j + len(markerClose)
	}
	out := body[:cut] + notice
	for i := len(open) - 1; i >= 0; i-- {
		_, end := sectionMarkers(open[i])
		out += end + "\n"
	}
	return out
}

// runeCut returns the largest n ≤ max that does not split a rune of s.
func runeCut(s string, max int) int {
	if max >= len(s) {
		return len(s)
	}
	if max < 0 {
		return 0
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return max
}

// cutRunes returns s cut to at most n runes.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// guardedReviews is the review calls (forge.Reviews) of a guarded forge: reads pass through,
// and every text posted (a reply, a review and its inline comments) is cleaned as comments
// are, so a review is censored and mentions no bot either.
type guardedReviews struct {
	rv forge.Reviews
	// clean is the guarded forge's.
	clean func(string) string
}

// ReviewComments implements forge.Reviews.
func (g *guardedReviews) ReviewComments(ctx context.Context, repo string, number int64) ([]forge.ReviewComment, error) {
	return g.rv.ReviewComments(ctx, repo, number)
}

// Reply implements forge.Reviews with the body cleaned.
func (g *guardedReviews) Reply(ctx context.Context, repo string, number int64, to forge.ReviewComment, body string) (int64, error) {
	return g.rv.Reply(ctx, repo, number, to, g.clean(body))
}

// ResolveThread implements forge.Reviews.
func (g *guardedReviews) ResolveThread(ctx context.Context, repo string, number int64, thread string) error {
	return g.rv.ResolveThread(ctx, repo, number, thread)
}

// PostReview implements forge.Reviews with the summary and every inline comment cleaned.
func (g *guardedReviews) PostReview(ctx context.Context, repo string, number int64, r forge.NewReview) (int64, error) {
	r.Body = g.clean(r.Body)
	comments := make([]forge.NewReviewComment, len(r.Comments))
	for i, c := range r.Comments {
		c.Body = g.clean(c.Body)
		comments[i] = c
	}
	r.Comments = comments
	return g.rv.PostReview(ctx, repo, number, r)
}
