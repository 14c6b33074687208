// Package base_test holds the house rules of spec/architecture.md ("Imports go one way") against
// the module's real import graph, as `go list` reports it. internal/base is the ground floor:
// the leaves every other package may import.
package base_test

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// module is the module path of go.mod.
const module = "github.com/alfred-bot/alfred"

// listed is the part of `go list -json` these rules read: a package and its non-test imports.
type listed struct {
	ImportPath string
	Imports    []string
}

// operator is the operator's side: the packages directly under internal/ that only cmd/ (and the
// store, for the interfaces it implements) may import.
var operator = []string{"config", "web", "admin", "doctor", "metrics", "demo"}

func TestImportsGoOneWay(t *testing.T) {
	pkgs := listModule(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: the rules below would hold vacuously", len(pkgs))
	}
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if why := forbidden(rel(p.ImportPath), rel(imp)); why != "" {
				t.Errorf("%s imports %s: %s", rel(p.ImportPath), rel(imp), why)
			}
		}
	}
}

// TestForbiddenCatchesEachRule keeps each rule able to fail: one import that breaks it.
func TestForbiddenCatchesEachRule(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"internal/base/censor", "internal/config"},
		{"internal/base/cost", "mailbox"},
		{"migrations", "internal/base/pgtest"},
		{"mailbox", "internal/metrics"},
		{"runner", "internal/config"},
		{"webhook/gitlab", "internal/web"},
		{"mailbox", "runner/gitrepo"},
		{"webhook/forge", "runner/phase"},
		{"runner/phase", "mailbox"},
		{"mailbox", "internal/store/sqlstore"},
		{"internal/web", "internal/store/sqlstore"},
	} {
		if forbidden(c.from, c.to) == "" {
			t.Errorf("%s → %s is allowed; the rule that forbids it is gone", c.from, c.to)
		}
	}
	for _, c := range []struct{ from, to string }{
		{"mailbox", "internal/base/censor"},
		{"internal/base/pgtest", "migrations"},
		{"cmd/alfred", "internal/config"},
		{"internal/store/sqlstore", "internal/web"},
		{"mailbox", "runner/phase"},
		{"internal/web", "internal/admin"},
	} {
		if why := forbidden(c.from, c.to); why != "" {
			t.Errorf("%s → %s is refused (%s); it is allowed", c.from, c.to, why)
		}
	}
}

// forbidden returns why the package at path from (relative to the module) may not import to, or
// "" when it may.
func forbidden(from, to string) string {
	switch {
	case under(from, "migrations") || under(from, "internal/base") && to != "migrations":
		return "the ground floor (internal/base, and migrations, the embedded schema pgtest applies) imports nothing of Alfred's"
	case from == "webhook/forge":
		return "webhook/forge is the vocabulary leaf"
	case from == "runner/phase" && to != "webhook/forge":
		return "runner/phase imports only webhook/forge"
	case under(from, "mailbox") && under(to, "runner") && to != "runner/phase":
		return "mailbox reaches the runner only through runner/phase and its own interfaces"
	}
	if isOperator(to) {
		if under(from, "cmd") || under(from, "internal/store") || isOperator(from) || under(from, "deploy") {
			return ""
		}
		return "the operator's side is imported only by cmd/ and the store"
	}
	if under(to, "internal/store") && !under(from, "cmd") && !under(from, "internal/store") && !under(from, "deploy") {
		return "the store is imported only by cmd/ (it implements the interfaces of its users)"
	}
	return ""
}

func isOperator(p string) bool {
	for _, o := range operator {
		if under(p, "internal/"+o) {
			return true
		}
	}
	return false
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func rel(p string) string { return strings.TrimPrefix(p, module+"/") }

// listModule runs `go list -json ./...` at the module's root.
func listModule(t *testing.T) []listed {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(bufio.NewReader(strings.NewReader(string(out))))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
