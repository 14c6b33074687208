package forgejo_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestClientPollConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunPollConformance(t, func(t *testing.T) (forge.Poller, forgetest.ReviewSeeder) {
		s := forgetest.NewForgejoServer(t)
		return newClient(t, s.URL, s.Token), s
	})
}

// BenchmarkPollCost measures one poll's requests with 10 and with 10,000 repositories on the
// forge, each with an issue the bot has nothing to do with, and one issue assigned to the bot:
// the requests of a poll do not grow with the repositories (ratio 1).
func BenchmarkPollCost(b *testing.B) {
	requests := map[int]float64{}
	for _, repos := range []int{10, 10000} {
		s := forgetest.NewForgejoServer(b)
		s.AddUser("alice")
		for i := range repos {
			repo := fmt.Sprintf("org%d/repo%d", i%100, i)
			s.AddRepo(repo, "main", "https://example.org/"+repo+".git")
			s.AddIssue(repo, forgetest.SeedIssue{Title: "t", Author: "alice"})
		}
		ref := forge.IssueRef{Repo: "org0/repo0", Number: 1}
		s.SetIssueAssignees(ref, "alice", forgetest.BotLogin)
		c := newClient(b, s.URL, s.Token)
		since := time.Time{}
		before := len(s.Requests())
		for range b.N {
			if _, err := c.Changes(b.Context(), since); err != nil {
				b.Fatal(err)
			}
		}
		requests[repos] = float64(len(s.Requests())-before) / float64(b.N)
	}
	b.ReportMetric(requests[10], "requests/poll@10")
	b.ReportMetric(requests[10000], "requests/poll@10000")
	b.ReportMetric(requests[10000]/requests[10], "ratio")
}
