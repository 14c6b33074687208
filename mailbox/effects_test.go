package mailbox

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every Store method is either a write, which effectStore counts, or a read, which it passes
// through: a method added to Store fails here until it is classified (and, for a write,
// counted), so an event that writes through it is never taken for one that changed nothing.
func TestEffectStoreCountsEveryWrite(t *testing.T) {
	writes := map[string]bool{
		"Deliver": true, "MarkProcessed": true, "Save": true, "SaveProcessed": true, "SaveData": true,
		"Lease": true, "Claim": true, "Extend": true, "Release": true, "InsertQuestions": true, "SetQuestionsDeadline": true,
		"AnswerQuestion": true, "StartRun": true, "FinishRun": true, "InterruptRuns": true,
		"FinishRecoveredRun": true, "SaveApplied": true, "DiscardUnapplied": true, "RecordComment": true,
		"ApplyComment": true, "SaveReconciled": true, "FailEvents": true, "LeaseEvents": true, "LeaseRun": true,
	}
	reads := map[string]bool{
		"PendingEvents": true, "Get": true, "ExpiredLeases": true, "UnfinishedMailboxes": true,
		"Questions": true, "RunningRuns": true, "Runs": true, "UnappliedRun": true, "PostedComment": true,
		"ReconcileDue": true, "Tracked": true, "KnownRepos": true, "QueuedRuns": true, "CancelRequested": true,
	}
	st := reflect.TypeFor[Store]()
	for i := range st.NumMethod() {
		name := st.Method(i).Name
		require.True(t, writes[name] != reads[name], "Store.%s is classified as exactly one of write or read", name)
		fx := new(effects)
		// The wrapped store is nil: a counted method counts, then panics calling it.
		m := reflect.ValueOf(effectStore{fx: fx}).MethodByName(name)
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			args[j] = reflect.Zero(m.Type().In(j))
		}
		func() {
			defer func() { _ = recover() }()
			m.Call(args)
		}()
		want := int64(0)
		if writes[name] {
			want = 1
		}
		require.Equal(t, want, fx.count(), "Store.%s counted", name)
	}
}
