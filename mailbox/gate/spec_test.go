package gate

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var rowRE = regexp.MustCompile("^\\| `([a-z_]+)` \\| ([a-z]+) \\| ([a-z]+) \\| ([a-z]+) \\| ([a-z]+) \\|$")

// The table of spec/authorization.md says exactly what the gate's table says: every kind, its
// default need and what happens below it in each state.
func TestSpecMatchesTheGateTable(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../spec/authorization.md")
	require.NoError(t, err)
	defer f.Close()
	spec := map[Kind][]string{}
	var order []Kind
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
			continue
		}
		if m := rowRE.FindStringSubmatch(line); m != nil && section == "The table" {
			spec[Kind(m[1])] = m[2:]
			order = append(order, Kind(m[1]))
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, Kinds(), order, "one row per kind, in order")
	needs := DefaultNeeds()
	for _, k := range Kinds() {
		want := []string{needs.Need(k).String()}
		for _, s := range States() {
			want = append(want, string(below[k][s]))
		}
		require.Equal(t, want, spec[k], "row %s", k)
	}
}
