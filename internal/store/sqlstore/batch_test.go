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
