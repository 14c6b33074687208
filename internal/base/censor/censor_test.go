package censor_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/censor"
)

const (
	token = "glpat-s3cr3t-token-0123"
	short = "alfred"
)

func b64(s string) string    { return base64.StdEncoding.EncodeToString([]byte(s)) }
func rawURL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestString(t *testing.T) {
	t.Parallel()
	c := censor.New(censor.Config{Secrets: []string{token, short, "p@ss word!", "", "hook-secret-1", `pw\s3cr3t"<x>`, "pl+us-s3cr3t-value"},
		Users: []string{"alfred-bot"}})
	for name, tc := range map[string]struct{ in, want string }{
		"no secret":               {"nothing to hide here", "nothing to hide here"},
		"empty":                   {"", ""},
		"long secret":             {"token " + token + " sent", "token [redacted] sent"},
		"long inside a word":      {"x" + token + "y", "x[redacted]y"},
		"twice":                   {token + token, "[redacted]"},
		"std base64":              {"k=" + b64(token), "k=[redacted]"},
		"raw url base64":          {"k=" + rawURL(token) + ".", "k=[redacted]."},
		"basic configured user":   {"Authorization: Basic " + b64("alfred-bot:"+token), "Authorization: Basic [redacted]"},
		"basic oauth2":            {"Basic " + b64("oauth2:"+token), "Basic [redacted]"},
		"basic x-access-token":    {"Basic " + rawURL("x-access-token:"+token), "Basic [redacted]"},
		"basic of short secret":   {"Basic " + b64("oauth2:"+short), "Basic [redacted]"},
		"query escaped":           {"url?pw=p%40ss+word%21", "url?pw=[redacted]"},
		"path escaped":            {"postgres://u:p@ss%20word%21@db", "postgres://u:[redacted]@db"},
		"overlapping secrets":     {"hook-secret-1" + token[:5], "[redacted]" + token[:5]},
		"short as assignment":     {"password=alfred", "password=[redacted]"},
		"short between spaces":    {"user alfred logged in", "user [redacted] logged in"},
		"short alone":             {"alfred", "[redacted]"},
		"short in a path":         {"alfred-bot/alfred.git and /var/lib/alfred", "alfred-bot/alfred.git and /var/lib/alfred"},
		"short in a dotted key":   {"alfred.managed=true", "alfred.managed=true"},
		"short ends a sentence":   {"the password is alfred.", "the password is [redacted]."},
		"short after //":          {"postgres://alfred:alfred@db/alfred", "postgres://[redacted]:[redacted]@db/alfred"},
		"short beside a lone dot": {". alfred .", ". [redacted] ."},
		"short quoted":            {`pw "alfred"`, `pw "[redacted]"`},
		"short in a longer word":  {"alfredo and my_alfred and alfred2", "alfredo and my_alfred and alfred2"},
		"short with hyphen":       {"alfred-bot", "alfred-bot"},
		"short other case":        {"Alfred", "Alfred"},
		"short beside letters ü":  {"üalfred", "üalfred"},
		"short next to redaction": {"alfred" + token, "[redacted]"},
		"short base64 is long":    {"x" + b64(short) + "x", "x[redacted]x"},
		"go quoted (%q)":          {`parse "postgres://a:pw\\s3cr3t\"<x>@db"`, `parse "postgres://a:[redacted]@db"`},
		"json escaped":            {`{"dsn":"pw\\s3cr3t\"\u003cx\u003e"}`, `{"dsn":"[redacted]"}`},
		"json escaped, no html":   {`{"dsn":"pw\\s3cr3t\"<x>"}`, `{"dsn":"[redacted]"}`},
		"html/template escaped":   {`<td>pw\s3cr3t&#34;&lt;x&gt;</td>`, `<td>[redacted]</td>`},
		"html/template's plus":    {`<td>pl&#43;us-s3cr3t-value</td>`, `<td>[redacted]</td>`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, c.String(tc.in))
			require.Equal(t, tc.want, string(c.Bytes([]byte(tc.in))))
		})
	}
}

func TestNoSecrets(t *testing.T) {
	t.Parallel()
	var nilCensor *censor.Censor
	require.Equal(t, "a "+token, nilCensor.String("a "+token))
	in := []byte("keep " + token)
	require.Equal(t, in, censor.New(censor.Config{}).Bytes(in))
	out := censor.New(censor.Config{Secrets: []string{"other-secret"}}).Bytes(in)
	require.Same(t, &in[0], &out[0], "nothing replaced: the same slice")
}

func TestHandler(t *testing.T) {
	t.Parallel()
	c := censor.New(censor.Config{Secrets: []string{token, short}})
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		log := slog.New(c.Handler(h)).With("with", "w "+token)
		log.Info("msg "+token, "str", token, "err", fmt.Errorf("dial: %s", b64("oauth2:"+token)),
			"any", struct{ T string }{token}, "n", 3, "db", "password=alfred")
		log.WithGroup("g").Info("grouped", slog.Group("inner", slog.String("s", token)))
	}
	out := buf.String()
	require.NotContains(t, out, token)
	require.NotContains(t, out, b64("oauth2:"+token))
	require.NotContains(t, out, "password=alfred")
	require.Contains(t, out, "n=3")
	require.Contains(t, out, `"n":3`)
	require.Contains(t, out, "grouped")
	require.Equal(t, 2*8, strings.Count(out, censor.Redacted), out)

	var nilCensor *censor.Censor
	h := slog.NewTextHandler(&buf, nil)
	require.Equal(t, slog.Handler(h), nilCensor.Handler(h))
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := censor.New(censor.Config{Secrets: []string{token, short}})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got := c.String("alfred " + token); got != "[redacted] [redacted]" {
					errs <- errors.New(got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// FuzzString checks that censoring never panics and that no secret, encoding or Basic form is
// left in the output, beyond what the package documentation's guarantee allows.
func FuzzString(f *testing.F) {
	f.Add("password=alfred; token "+token, "alfred", token, "oauth2")
	f.Add("alfredalfred alfred", "alfred", "a", "")
	f.Add("üüü", "ü", "\xff", "u")
	f.Add(b64("oauth2:"+token), token, "xx", "oauth2")
	f.Fuzz(func(t *testing.T, text, s1, s2, user string) {
		c := censor.New(censor.Config{Secrets: []string{s1, s2}, Users: []string{user}})
		// Plant the secrets and their forms in the text too, so that matches are common.
		in := text + " " + s1 + "=" + b64(user+":"+s2) + rawURL(s1) + text + s2
		out := c.String(in)
		require.Equal(t, out, string(c.Bytes([]byte(in))))
		for _, s := range []string{s1, s2} {
			if s == "" {
				continue
			}
			for _, p := range forms(s, user) {
				if strings.ContainsAny(p, "[]") || strings.Contains(censor.Redacted, p) {
					continue // may overlap an inserted [redacted]: outside the guarantee
				}
				if len(p) >= censor.MinLen {
					require.NotContains(t, out, p, "in %q", in)
				} else {
					require.False(t, hasToken(out, p), "whole-token %q left in %q (from %q)", p, out, in)
				}
			}
		}
	})
}

// forms lists s and the encodings the Censor hides, with the Basic forms for user and the git users.
func forms(s, user string) []string {
	out := []string{s}
	for _, v := range []string{s, user + ":" + s, "oauth2:" + s, "x-access-token:" + s} {
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			out = append(out, e.EncodeToString([]byte(v)))
		}
	}
	return out
}

// hasToken reports whether s occurs in text as a whole token. Every Redacted marker is a
// boundary, as in the Censor; '.' and '/' between two word characters join them.
func hasToken(text, s string) bool {
	for part := range strings.SplitSeq(text, censor.Redacted) {
		for at := 0; at <= len(part)-len(s); at++ {
			j := strings.Index(part[at:], s)
			if j < 0 {
				break
			}
			at += j
			end := at + len(s)
			if !joinedBefore(part[:at]) && !joinedAfter(part[end:]) {
				return true
			}
		}
	}
	return false
}

// joinedBefore reports whether the text before an occurrence ends in a word character, or in a
// joiner preceded by one.
func joinedBefore(before string) bool {
	r, size := utf8.DecodeLastRuneInString(before)
	if before == "" {
		return false
	}
	if isWord(r) {
		return true
	}
	p, _ := utf8.DecodeLastRuneInString(before[:len(before)-size])
	return (r == '.' || r == '/') && len(before) > size && isWord(p)
}

// joinedAfter is joinedBefore for the text after an occurrence.
func joinedAfter(after string) bool {
	r, size := utf8.DecodeRuneInString(after)
	if after == "" {
		return false
	}
	if isWord(r) {
		return true
	}
	q, _ := utf8.DecodeRuneInString(after[size:])
	return (r == '.' || r == '/') && len(after) > size && isWord(q)
}

func isWord(r rune) bool { return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// TestKeep: an occurrence of a secret wholly inside a kept text (the program's own structure)
// is left alone; one that reaches outside it is censored whole.
func TestKeep(t *testing.T) {
	t.Parallel()
	keep := []string{"<!-- alfred:key=", ":kind=", " -->", "<!-- alfred:section=", "status::in_review"}
	c := censor.New(censor.Config{Secrets: []string{short, "status", token}, Keep: append(keep, "")})
	for name, tc := range map[string]struct{ in, want string }{
		"marker":                 {"<!-- alfred:key=ack-1:kind=ack -->\nhello", "<!-- alfred:key=ack-1:kind=ack -->\nhello"},
		"marker, secret in text": {"<!-- alfred:key=ack-1:kind=ack -->\npw alfred", "<!-- alfred:key=ack-1:kind=ack -->\npw [redacted]"},
		"section marker":         {"<!-- alfred:section=analysis:start -->", "<!-- alfred:section=analysis:start -->"},
		"label kept":             {"label status::in_review set, status: ok", "label status::in_review set, [redacted]: ok"},
		"field not kept":         {"<!-- alfred:key=alfred:kind=status -->", "<!-- alfred:key=[redacted]:kind=[redacted] -->"},
		"reaching outside":       {"<!-- alfred:key=" + token[:4] + " " + token, "<!-- alfred:key=" + token[:4] + " [redacted]"},
		"long across kept":       {"x -->" + token, "x -->[redacted]"},
		"no keep, no secret":     {"<!-- x -->", "<!-- x -->"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, c.String(tc.in))
		})
	}
	// A long secret that starts inside a kept text and ends outside it is censored whole.
	long := censor.New(censor.Config{Secrets: []string{"kind=s3cr3t-value"}, Keep: keep})
	require.Equal(t, "<!-- alfred:key=a:[redacted] -->", long.String("<!-- alfred:key=a:kind=s3cr3t-value -->"))
	// Without Keep the marker is lost: the defect kept texts mend.
	require.Equal(t, "<!-- [redacted]:key=ack-1:kind=ack -->",
		censor.New(censor.Config{Secrets: []string{short}}).String("<!-- alfred:key=ack-1:kind=ack -->"))
}
