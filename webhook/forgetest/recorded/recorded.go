// Package recorded reads recorded webhook deliveries: a JSON body saved byte for byte and, beside
// it, the headers it arrived with. Tests read the fixtures with it, and `alfred replay` reads the
// file it re-signs and sends; it imports no test code, so the binary can use it.
package recorded

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"
)

// Load reads a recorded delivery: the body at path (a .json file, returned byte for
// byte) and its headers from X.headers (path without .json) or X.json.headers, whichever
// exists. A headers file holds one "Name: value" per line; a first line that is an HTTP request
// line ("POST /webhooks/forgejo HTTP/1.1") and blank lines are skipped. Without a headers file
// headers is empty and err is nil. Errors: the body cannot be read, or a headers line has no
// colon.
func Load(path string) (headers http.Header, body []byte, err error) {
	body, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading fixture body: %w", err)
	}
	headers = http.Header{}
	candidates := []string{path + ".headers"}
	if base, ok := strings.CutSuffix(path, ".json"); ok {
		candidates = []string{base + ".headers", path + ".headers"}
	}
	for _, hp := range candidates {
		raw, err := os.ReadFile(hp)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading fixture headers: %w", err)
		}
		if err := parseHeaders(raw, headers); err != nil {
			return nil, nil, fmt.Errorf("parsing %s: %w", hp, err)
		}
		break
	}
	return headers, body, nil
}

func parseHeaders(raw []byte, h http.Header) error {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	first := true
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if first {
			first = false
			if isRequestLine(line) {
				continue
			}
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("line %d: not a header line", n)
		}
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return sc.Err()
}

// isRequestLine reports whether line looks like "METHOD /target HTTP/x.y".
func isRequestLine(line string) bool {
	f := strings.Fields(line)
	return len(f) == 3 && strings.HasPrefix(f[2], "HTTP/") && !strings.Contains(f[0], ":")
}
