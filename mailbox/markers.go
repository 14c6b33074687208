package mailbox

import (
	"fmt"
	"regexp"
	"strings"
)

// Every comment Alfred posts starts with a hidden marker naming its key (unique within the
// mailbox) and kind. Before posting, Alfred looks for its marker and edits that comment in
// place, so a retried pass never posts twice.
var markerRE = regexp.MustCompile(`<!-- alfred:key=([^:>\s]+):kind=([^:>\s]+) -->`)

// Marker renders the hidden marker for a comment key and kind, e.g.
// "<!-- alfred:key=ack:kind=ack -->".
func Marker(key, kind string) string {
	return fmt.Sprintf("<!-- alfred:key=%s:kind=%s -->", key, kind)
}

// ParseMarker returns the key and kind of the first marker in body, ok false when none.
func ParseMarker(body string) (key, kind string, ok bool) {
	m := markerRE.FindStringSubmatch(body)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

func sectionMarkers(name string) (start, end string) {
	return "<!-- alfred:section=" + name + ":start -->", "<!-- alfred:section=" + name + ":end -->"
}

// SetSection returns body with the named section replaced by content, or appended after the
// human's text when the section is not there yet (after a blank line, adding only the line
// breaks the text does not end with). The section sits between the hidden markers
// "<!-- alfred:section=NAME:start -->" and "<!-- alfred:section=NAME:end -->"; text outside
// them is kept byte for byte.
func SetSection(body, name, content string) string {
	start, end := sectionMarkers(name)
	block := start + "\n" + strings.TrimSpace(content) + "\n" + end
	i := strings.Index(body, start)
	if i >= 0 {
		if j := strings.Index(body[i:], end); j >= 0 {
			return body[:i] + block + body[i+j+len(end):]
		}
	}
	switch {
	case body == "":
		return block
	case strings.HasSuffix(body, "\n\n"):
		return body + block
	case strings.HasSuffix(body, "\n"):
		return body + "\n" + block
	}
	return body + "\n\n" + block
}

// Section returns the content of the named section, ok false when absent.
func Section(body, name string) (string, bool) {
	start, end := sectionMarkers(name)
	i := strings.Index(body, start)
	if i < 0 {
		return "", false
	}
	rest := body[i+len(start):]
	j := strings.Index(rest, end)
	if j < 0 {
		return "", false
	}
	return strings.TrimSpace(rest[:j]), true
}
