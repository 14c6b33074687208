package sqlstore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// Inside one group, the deliveries inserted under one delivery id with different bodies are
// marked (the statement's own look-up does not see them); duplicates and other forges are not.
func TestMarkOthersInBatch(t *testing.T) {
	req := func(forgeName, id, hash string) *insertReq {
		return &insertReq{ev: forge.Event{Forge: forgeName, DeliveryID: id, BodyHash: hash}}
	}
	batch := []*insertReq{
		req("gl", "a", "1"), req("gl", "b", "1"), req("gl", "a", "2"), // a: two bodies
		req("gl", "c", "1"), req("gl", "c", "1"), // c: a retry, the second a duplicate
		req("fj", "b", "2"), // b on another forge
	}
	res := make([]insertRes, len(batch))
	res[4].duplicate = true
	markOthersInBatch(batch, res)
	var marked []int
	for i, r := range res {
		if r.others {
			marked = append(marked, i)
		}
	}
	require.Equal(t, []int{0, 2}, marked)
}

// Inside one group, an inert delivery is recorded on arrival only when no delivery before it
// into the same mailbox waits for a pass; other mailboxes do not matter.
func TestInertInBatch(t *testing.T) {
	req := func(mailboxID int64, inert bool) *insertReq { return &insertReq{mailboxID: mailboxID, inert: inert} }
	batch := []*insertReq{
		req(1, true), req(1, true), // 1: two comments, both may rest
		req(2, false), req(2, true), // 2: an assignment, then a comment that must wait for it
		req(3, true), req(1, false), req(3, true), req(1, true), // 1 again: a label change, then a comment behind it
	}
	require.Equal(t, []bool{true, true, false, false, true, false, true, false}, inertInBatch(batch))
}
