// Package censor removes secrets from text before it leaves the process: log lines, comments
// and merge request descriptions, container output kept in run results, error messages and
// configuration dumps all pass one Censor built from every configured secret.
//
// # What is replaced
//
// For every secret s the Censor looks for these patterns, and replaces each occurrence with
// [Redacted]:
//
//   - s itself;
//   - base64 of s, in the standard and the URL alphabet, each with and without padding;
//   - s percent-encoded as in a URL query or path (url.QueryEscape, url.PathEscape), when
//     that differs from s (a database password inside database_url);
//   - s as it stands between the quotes of a Go quoted string (strconv.Quote: what an error
//     that quotes a value with %q shows, such as net/url's "parse \"postgres://…\"" of a
//     database_url whose password holds a backslash) and of a JSON string (encoding/json,
//     HTML-safe as it escapes by default, and without the HTML escaping), when they differ
//     from s;
//   - s escaped for HTML as html/template writes a text (its '+' as "&#43;") and as
//     html.EscapeString does, when that differs from s: a page that renders a stored text, then
//     passes the Censor, still hides a secret holding an ampersand, an angle bracket, a quote or a plus;
//   - the HTTP Basic credential of s for every configured user u: base64 of "u:s" in the same
//     four encodings. The users are the forges' git and bot user names plus [GitUsers], the
//     user names git credentials commonly carry ("oauth2", "x-access-token").
//
// Matching is exact and case-sensitive. Overlapping and adjacent occurrences become a single
// [Redacted].
//
// # Short patterns
//
// A pattern of [MinLen] bytes or more is replaced wherever it occurs, inside a word or not. A
// shorter pattern (a database password "alfred", say) is replaced only where it stands as a
// whole token. Tokens are runs of word characters (Unicode letters and digits, '_' and '-'),
// where a '.' or '/' between two word characters joins them into one token (host names, file
// paths, dotted label keys). An occurrence is a whole token when the character before it and
// the character after it (where there is one) neither are word characters nor join it to one;
// a [Redacted] that replaces a neighbour counts as a non-word character. So with the secret
// "alfred":
//
//	"password=alfred"        → "password=[redacted]"
//	"user alfred logged in"  → "user [redacted] logged in"
//	"the password is alfred." → "the password is [redacted]."
//	"alfred:alfred@db/alfred" → "[redacted]:[redacted]@db/alfred"
//	"alfredo", "my_alfred"   → unchanged
//	"alfred-bot/alfred.git"  → unchanged
//	"alfred.managed=true"    → unchanged
//	"Alfred"                 → unchanged (case-sensitive)
//
// A very short secret therefore still censors every free-standing word equal to it; keep
// secrets long (internal/config refuses a secret shorter than MinLen, made of letters alone, or
// found in Alfred's own texts).
//
// # Kept texts
//
// [Config.Keep] lists texts that are the program's own structure: the hidden markers of its
// comments and description sections, its label names. An occurrence of a pattern that lies
// wholly inside an occurrence of a kept text is left alone, so with the secret "alfred" the
// marker "<!-- alfred:key=ack-1:kind=ack -->" stays a marker. This shows nothing about the
// secret: a kept text is a constant that reads the same whatever the secrets are. An occurrence
// that reaches outside the kept text is censored whole, kept bytes included.
//
// # Guarantee
//
// The output contains no occurrence of a pattern of MinLen bytes or more, and no whole-token
// occurrence of a shorter one, except wholly inside an occurrence of a kept text, or where the
// pattern overlaps an inserted [Redacted] (a secret that contains '[' or ']' or is part of the
// word "redacted"): the text that surrounds a replacement is original text, and no secret is
// left in it.
//
// A Censor never changes after New and is safe for concurrent use. A nil *Censor returns its
// input unchanged.
package censor

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces every censored occurrence.
const Redacted = "[redacted]"

// MinLen is the length in bytes from which a pattern is censored wherever it occurs; shorter
// patterns are censored only as whole tokens (see the package documentation).
const MinLen = 8

// Margin is more bytes than the longest text a Censor replaces (a secret's longest encoding: a
// 4096-bit RSA key in PEM, URL-encoded, is about 10 KiB). A text cut from a longer one is
// censored with this much more on the side of the cut, which is then dropped: a secret the cut
// split leaves no part the censor could not recognise.
const Margin = 16 << 10

// GitUsers are the user names that git credentials for GitLab and Forgejo commonly pair with a
// token in HTTP Basic auth: GitLab accepts any user name and documents "oauth2", GitHub-style
// tooling uses "x-access-token". Their Basic forms are censored for every secret.
var GitUsers = []string{"oauth2", "x-access-token"}

// Config lists what a Censor hides.
type Config struct {
	// Secrets are the secret values; empty strings are ignored.
	Secrets []string
	// Users are user names that may pair with a secret in an HTTP Basic credential
	// (base64 of "user:secret"). GitUsers are always added.
	Users []string
	// Keep are the program's own fixed texts (marker pieces, label names): an occurrence of a
	// secret wholly inside one of them is not censored. Empty strings are ignored.
	Keep []string
}

// Censor replaces secrets and their encodings in text with Redacted.
type Censor struct {
	long  []string // patterns of MinLen bytes or more, longest first
	short []string // shorter patterns, whole tokens only, longest first
	keep  []string // kept texts (Config.Keep)
}

// New builds a Censor for cfg. It never fails: a Config without secrets gives a Censor that
// changes nothing.
func New(cfg Config) *Censor {
	users := slices.Concat(cfg.Users, GitUsers)
	var patterns []string
	for _, s := range cfg.Secrets {
		if s == "" {
			continue
		}
		patterns = append(patterns, s, url.QueryEscape(s), url.PathEscape(s))
		patterns = append(patterns, quotedForms(s)...)
		patterns = append(patterns, encodings(s)...)
		for _, u := range users {
			patterns = append(patterns, encodings(u+":"+s)...)
		}
	}
	slices.SortFunc(patterns, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	patterns = slices.Compact(patterns)
	c := &Censor{}
	for _, k := range cfg.Keep {
		if k != "" {
			c.keep = append(c.keep, k)
		}
	}
	for _, p := range patterns {
		if len(p) >= MinLen {
			c.long = append(c.long, p)
		} else {
			c.short = append(c.short, p)
		}
	}
	return c
}

// quotedForms returns s as it stands inside a Go quoted string and inside a JSON string, with
// and without JSON's HTML escaping, and escaped for HTML (duplicates of s are removed later).
func quotedForms(s string) []string {
	goq := strconv.Quote(s)
	out := []string{goq[1 : len(goq)-1]}
	var b strings.Builder
	for _, html := range []bool{true, false} {
		b.Reset()
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(s); err == nil {
			q := strings.TrimSuffix(b.String(), "\n")
			out = append(out, q[1:len(q)-1])
		}
	}
	return append(out, htmlTemplateReplacer.Replace(s), html.EscapeString(s))
}

// htmlTemplateReplacer escapes a text as html/template does in an element's content and a
// quoted attribute (its htmlEscaper, which also escapes + and NUL, unlike html.EscapeString).
var htmlTemplateReplacer = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;",
	"+", "&#43;", "<", "&lt;", ">", "&gt;")

// encodings returns the four base64 forms of s.
func encodings(s string) []string {
	b := []byte(s)
	return []string{
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
	}
}

// String returns s with every secret replaced by Redacted.
func (c *Censor) String(s string) string {
	out, _ := c.censor(s)
	return out
}

// Bytes returns b with every secret replaced by Redacted: b itself when nothing was replaced,
// else a new slice.
func (c *Censor) Bytes(b []byte) []byte {
	out, changed := c.censor(string(b))
	if !changed {
		return b
	}
	return []byte(out)
}

// censor returns s censored and whether anything was replaced.
func (c *Censor) censor(s string) (string, bool) {
	if c == nil || len(c.long)+len(c.short) == 0 {
		return s, false
	}
	mask := c.mask(s)
	if mask == nil {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && mask[j] == mask[i] {
			j++
		}
		if mask[i] {
			b.WriteString(Redacted)
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String(), true
}

// mask marks the bytes of s that belong to a censored occurrence; nil when there is none.
func (c *Censor) mask(s string) []bool {
	var mask []bool
	mark := func(i, n int) {
		if mask == nil {
			mask = make([]bool, len(s))
		}
		for k := i; k < i+n; k++ {
			mask[k] = true
		}
	}
	kept := c.kept(s)
	for _, p := range c.long {
		for i := range occurrences(s, p) {
			if !kept(i, len(p)) {
				mark(i, len(p))
			}
		}
	}
	if len(c.short) == 0 {
		return mask
	}
	type occ struct{ at, n int }
	var pending []occ
	for _, p := range c.short {
		for i := range occurrences(s, p) {
			if !kept(i, len(p)) {
				pending = append(pending, occ{i, len(p)})
			}
		}
	}
	// A replacement turns its neighbours' surroundings into non-word characters, which can make
	// another short occurrence a whole token: repeat until nothing changes. Every round masks at
	// least one more byte, so this ends.
	for changed := true; changed; {
		changed = false
		rest := pending[:0]
		for _, o := range pending {
			if tokenAt(s, mask, o.at, o.n) {
				mark(o.at, o.n)
				changed = true
			} else {
				rest = append(rest, o)
			}
		}
		pending = rest
	}
	return mask
}

// kept returns a function reporting whether s[i:i+n] lies wholly inside one occurrence of a
// kept text.
// The kept texts are looked for at the first call, so a text without any secret costs nothing.
func (c *Censor) kept(s string) func(i, n int) bool {
	type span struct{ at, end int }
	var spans []span
	found := false
	return func(i, n int) bool {
		if !found {
			found = true
			for _, k := range c.keep {
				for j := range occurrences(s, k) {
					spans = append(spans, span{j, j + len(k)})
				}
			}
		}
		for _, sp := range spans {
			if sp.at <= i && i+n <= sp.end {
				return true
			}
		}
		return false
	}
}

// occurrences yields the start of every occurrence of p in s, overlapping ones included.
func occurrences(s, p string) func(yield func(int) bool) {
	return func(yield func(int) bool) {
		for off := 0; off <= len(s)-len(p); {
			i := strings.Index(s[off:], p)
			if i < 0 {
				return
			}
			if !yield(off + i) {
				return
			}
			off += i + 1
		}
	}
}

// tokenAt reports whether s[at:at+n] stands as a whole token (see the package documentation).
// A character any byte of which is masked counts as non-word: in the output it is cut by a
// Redacted.
func tokenAt(s string, mask []bool, at, n int) bool {
	masked := func(i, j int) bool { return mask != nil && slices.Contains(mask[i:j], true) }
	// word reports whether the rune r at s[i:j] is an unmasked word character.
	word := func(r rune, i, j int) bool { return isWord(r) && !masked(i, j) }
	if at > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:at])
		if word(r, at-size, at) {
			return false
		}
		if isJoiner(r) && !masked(at-size, at) && at-size > 0 {
			p, psize := utf8.DecodeLastRuneInString(s[:at-size])
			if word(p, at-size-psize, at-size) {
				return false
			}
		}
	}
	if end := at + n; end < len(s) {
		r, size := utf8.DecodeRuneInString(s[end:])
		if word(r, end, end+size) {
			return false
		}
		if next := end + size; isJoiner(r) && !masked(end, next) && next < len(s) {
			q, qsize := utf8.DecodeRuneInString(s[next:])
			if word(q, next, next+qsize) {
				return false
			}
		}
	}
	return true
}

// isWord reports whether r is a word character: a letter, a digit, '_' or '-'.
func isWord(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// isJoiner reports whether r joins two word characters into one token.
func isJoiner(r rune) bool { return r == '.' || r == '/' }
