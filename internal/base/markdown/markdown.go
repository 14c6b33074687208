// Package markdown renders a text for a page as the forges render Markdown: GitHub Flavored
// Markdown (tables, task lists, strikethrough, autolinks), with goldmark. Raw HTML in the text
// is not passed through (goldmark's default, html.WithUnsafe unset): a hidden marker such as
// Alfred's <!-- alfred:key=… --> stays hidden, a <script> is dropped, and a link or image whose
// URL has a dangerous scheme (javascript:, vbscript:, file:, most data:) gets no address, so a
// text cannot inject markup into the page that shows it.
package markdown

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

var gfm = goldmark.New(goldmark.WithExtensions(extension.GFM))

// HTML returns body rendered, or body escaped in a <pre> when goldmark cannot render it.
func HTML(body string) template.HTML {
	var b bytes.Buffer
	if err := gfm.Convert([]byte(body), &b); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(body) + "</pre>") //nolint:gosec // escaped
	}
	return template.HTML(b.String()) //nolint:gosec // goldmark escapes text and drops raw HTML
}
