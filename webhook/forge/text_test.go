package forge_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

func TestDefuseClosingReferences(t *testing.T) {
	t.Parallel()
	const wj = "\u2060"
	for in, want := range map[string]string{
		"Fixes #7":                   "F" + wj + "ixes #7",
		"closes acme/shop#7, and #8": "c" + wj + "loses acme/shop#7, and #8",
		"Resolves: https://gl.example/a/-/issues/7": "R" + wj + "esolves: https://gl.example/a/-/issues/7",
		"IMPLEMENTS issue #3":                       "I" + wj + "MPLEMENTS issue #3",
		"Closing issues #3 and #4":                  "C" + wj + "losing issues #3 and #4",
		"reopens #9":                                "r" + wj + "eopens #9",
		"fix PROJ-12":                               "f" + wj + "ix PROJ-12",
		"Fixed a typo in the closing tag.":          "Fixed a typo in the closing tag.",
		"prefix #7 is not a keyword":                "prefix #7 is not a keyword",
		"fixes the bug, see #7":                     "fixes the bug, see #7",
		"":                                          "",
	} {
		got := forge.DefuseClosingReferences(in)
		require.Equal(t, want, got, "%q", in)
		require.Equal(t, got, forge.DefuseClosingReferences(got), "defusing twice changes nothing: %q", in)
	}
}
