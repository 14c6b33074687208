package textwalk

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type kind string

type inner struct {
	Text  string
	List  []string
	Files map[string]string
	K     kind
}

type outer struct {
	Title  string
	In     *inner
	Items  []inner
	Any    any
	hidden string
}

func TestMapReachesEveryString(t *testing.T) {
	v := outer{Title: "s3cret", In: &inner{Text: "a s3cret b", List: []string{"s3cret"}, Files: map[string]string{"s3cret.txt": "s3cret"}, K: "s3cret"},
		Items: []inner{{Text: "s3cret"}}, Any: &inner{Text: "s3cret"}, hidden: "s3cret"}
	Map(&v, func(s string) string { return strings.ReplaceAll(s, "s3cret", "X") })
	require.Equal(t, "X", v.Title)
	require.Equal(t, "a X b", v.In.Text)
	require.Equal(t, []string{"X"}, v.In.List)
	require.Equal(t, map[string]string{"s3cret.txt": "X"}, v.In.Files, "keys are kept")
	require.Equal(t, kind("X"), v.In.K)
	require.Equal(t, "X", v.Items[0].Text)
	require.Equal(t, "X", v.Any.(*inner).Text)
	require.Equal(t, "s3cret", v.hidden, "unexported fields are left alone")
	Map(nil, strings.ToUpper)
	Map(v, strings.ToUpper) // not a pointer: nothing
}

func TestStorable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "", "plain €": "plain €", "a\x00b": "a\uFFFDb", "a\xffb": "a\uFFFDb", "\xe2\x82": "\uFFFD"} {
		if got := Storable(in); got != want {
			t.Errorf("Storable(%q) = %q, want %q", in, got, want)
		}
	}
}
