package mailbox

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVocabularyCoversPosts reads the package's source: every kind and every fixed word of a key
// that a post call (m.post) or a Marker call writes is in markerKinds and markerKeyStems, so
// the configuration's refusal of secrets found in Alfred's own texts knows them all.
func TestVocabularyCoversPosts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var kinds, stems []string
	literal := func(e ast.Expr) (string, bool) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			s, err := strconv.Unquote(b.Value)
			return s, err == nil
		}
		if id, ok := e.(*ast.Ident); ok && id.Name == "ProgressKey" {
			return ProgressKey, true
		}
		return "", false
	}
	// stem returns the fixed start of a key expression: "ack-" of fmt.Sprintf("ack-%d", n),
	// "ci-" of "ci-"+sha.
	stem := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.CallExpr:
			if len(e.Args) > 0 {
				if s, ok := literal(e.Args[0]); ok {
					s, _, _ = strings.Cut(s, "%")
					return s, true
				}
			}
		case *ast.BinaryExpr:
			return literal(e.X)
		}
		return literal(e)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var key, kind ast.Expr
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				if fn.Sel.Name == "post" && len(call.Args) == 6 {
					key, kind = call.Args[3], call.Args[4]
				}
			case *ast.Ident:
				if fn.Name == "Marker" && len(call.Args) == 2 {
					key, kind = call.Args[0], call.Args[1]
				}
			}
			if kind == nil {
				return true
			}
			if s, ok := literal(kind); ok {
				kinds = append(kinds, s)
			}
			if s, ok := stem(key); ok {
				stems = append(stems, s)
			}
			return true
		})
	}
	require.Greater(t, len(kinds), 20, "the post calls were found")
	for _, k := range kinds {
		require.Contains(t, markerKinds, k, "kind %q is posted: add it to markerKinds", k)
	}
	for _, s := range stems {
		require.True(t, slices.ContainsFunc(markerKeyStems, func(st string) bool { return strings.HasPrefix(s, st) }),
			"key stem %q is posted: add it to markerKeyStems", s)
	}
}
