package mailboxtest_test

import (
	"testing"
	"time"

	"github.com/alfred-bot/alfred/mailbox/mailboxtest"
	"github.com/alfred-bot/alfred/mailbox/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(_ *testing.T, now func() time.Time) storetest.Store { return mailboxtest.NewStore(now) })
}
