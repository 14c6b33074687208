package mailbox

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// spec is what spec/lifecycle.md says about the states.
type spec struct {
	status  map[State]string // state → status label ("" for — and unchanged)
	order   []State
	edges   []string // "from --> to: label" of the diagram, [*] left out
	working []string // "from | on | to" of the table of transitions from any working state
}

var (
	stateRowRE = regexp.MustCompile("^\\| `([a-z_]+)` \\| ([^|]+) \\|")
	edgeRE     = regexp.MustCompile(`^\s*([a-z_\[\]*]+)\s*-->\s*([a-z_\[\]*]+)\s*(?::\s*(.*))?$`)
)

func readSpec(t *testing.T) spec {
	t.Helper()
	f, err := os.Open("../spec/lifecycle.md")
	require.NoError(t, err)
	defer f.Close()
	sp := spec{status: map[State]string{}}
	section, inDiagram := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case line == "```mermaid":
			inDiagram = true
		case line == "```":
			inDiagram = false
		case inDiagram:
			m := edgeRE.FindStringSubmatch(line)
			if m == nil || m[1] == "[*]" || m[2] == "[*]" {
				continue
			}
			sp.edges = append(sp.edges, fmt.Sprintf("%s --> %s: %s", m[1], m[2], strings.TrimSpace(m[3])))
		case section == "States and labels":
			if m := stateRowRE.FindStringSubmatch(line); m != nil {
				label := strings.Trim(strings.TrimSpace(m[2]), "`")
				if label == "—" || label == "unchanged" {
					label = ""
				}
				sp.status[State(m[1])] = label
				sp.order = append(sp.order, State(m[1]))
			}
		case section == "From any working state" && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| from"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.ReplaceAll(strings.TrimSpace(cells[i]), "`", "")
			}
			sp.working = append(sp.working, strings.Join(cells, " | "))
		}
	}
	require.NoError(t, sc.Err())
	return sp
}

// The states table, the diagram and the table of transitions from any working state in
// spec/lifecycle.md say exactly what the lifecycle table says.
func TestSpecMatchesTheLifecycleTable(t *testing.T) {
	t.Parallel()
	sp := readSpec(t)
	labels := DefaultLabels()

	var states []State
	want := map[State]string{}
	var edges []string
	for _, d := range lifecycle {
		states = append(states, d.State)
		want[d.State] = labels.Status(d.State)
		for _, tr := range d.Next {
			edges = append(edges, fmt.Sprintf("%s --> %s: %s", d.State, tr.To, tr.When))
		}
	}
	require.Equal(t, states, sp.order, "the states, in the table's order")
	require.Equal(t, want, sp.status, "the status label of each state")
	slices.Sort(edges)
	slices.Sort(sp.edges)
	require.Equal(t, edges, sp.edges, "the transitions of the diagram")

	var working []string
	for _, tr := range workingTransitions {
		from := "any working state"
		if tr.On == onBlockedLabel {
			from = "any working state but blocked"
		}
		working = append(working, fmt.Sprintf("%s | %s | %s", from, tr.When, tr.To))
	}
	for _, tr := range anyStateTransitions {
		working = append(working, fmt.Sprintf("any state | %s | %s", tr.When, tr.To))
	}
	working = append(working, fmt.Sprintf("%s | %s | the state it was blocked from", StateBlocked, retryWhen))
	require.Equal(t, working, sp.working, "the transitions from any working state")
	require.True(t, def(StateBlocked).accepts(inputRetry))
}

// Every trigger the machine follows leads somewhere from every state that can see it: each
// state with a run can fail, and each state the table names is a row of the table.
func TestLifecycleTableIsClosed(t *testing.T) {
	t.Parallel()
	for _, d := range lifecycle {
		seen := map[trigger]bool{}
		for _, tr := range d.Next {
			require.False(t, seen[tr.On], "%s: two transitions on %s", d.State, tr.On)
			seen[tr.On] = true
			require.Contains(t, byState, tr.To, "%s --> %s: not a state of the table", d.State, tr.To)
		}
		if d.Phase != "" {
			to, err := next(d.State, onRunFailed)
			require.NoError(t, err, "%s starts a run: a failed run must lead somewhere", d.State)
			require.Equal(t, StateBlocked, to)
			require.Equal(t, wakeRun, d.Wake, "%s starts a run: due at once", d.State)
		}
		if d.accepts(inputAnswers) {
			require.Equal(t, wakeDeadline, d.Wake, "%s waits for answers: woken by the deadline", d.State)
		}
	}
	_, err := next(StateIdle, onIssueClosed)
	require.Error(t, err, "idle is not working")
	_, err = next(StateBlocked, onBlockedLabel)
	require.Error(t, err, "blocked is not blocked again")
	to, err := next(StateDone, onIssueGone)
	require.NoError(t, err)
	require.Equal(t, StateCancelled, to)
}
