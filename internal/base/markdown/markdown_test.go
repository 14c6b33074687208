package markdown_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/markdown"
)

func TestHTML(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		body       string
		has, hasNo []string
	}{
		"a hidden marker stays hidden": {
			body:  "<!-- alfred:key=ack-1:kind=ack -->\nI'm on it.",
			has:   []string{"<p>I'm on it.</p>"},
			hasNo: []string{"alfred:key"},
		},
		"raw HTML is dropped": {
			body:  "hello <script>alert(1)</script> <b onmouseover=x>bold</b>",
			hasNo: []string{"<script", "onmouseover", "<b"},
		},
		"a javascript: link gets no address": {
			body:  "[click](javascript:alert(1)) [ok](https://forge.example/pr/2)",
			has:   []string{`<a href="https://forge.example/pr/2">ok</a>`},
			hasNo: []string{"javascript:"},
		},
		"GitHub Flavored: a table, a task list, strikethrough": {
			body: "| q | default |\n|---|---|\n| q1 | a |\n\n- [x] done\n- [ ] to do\n\n~~old~~",
			has:  []string{"<table>", "<td>q1</td>", `<input checked="" disabled="" type="checkbox"`, "<del>old</del>"},
		},
		"text is escaped": {
			body: "a < b && c > d",
			has:  []string{"a &lt; b &amp;&amp; c &gt; d"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := string(markdown.HTML(c.body))
			for _, s := range c.has {
				require.Contains(t, got, s)
			}
			for _, s := range c.hasNo {
				require.NotContains(t, got, s)
			}
		})
	}
}
