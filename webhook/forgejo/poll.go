package forgejo

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/alfred-bot/alfred/webhook/forge"
)

var _ forge.Poller = (*Client)(nil)

// Changes implements forge.Poller: the bot's notification threads about issues and pull
// requests updated at or after since (GET /notifications?all=true&since=&subject-type=issue
// &subject-type=pull, read and unread alike, following pages), then the open issues assigned
// to the bot updated since (AssignedIssues), because Forgejo and Gitea notify the assignee of
// an assignment, a comment, a close or reopen, a review and a merge, but not of a label
// change. Two requests (plus pages) whatever the number of repositories.
func (c *Client) Changes(ctx context.Context, since time.Time) ([]forge.Change, error) {
	var out []forge.Change
	seen := 0
	for page := 1; ; page++ {
		q := url.Values{"all": {"true"}, "subject-type": {"issue", "pull"}}
		clientPage(q, page, since)
		var list []*gitea.NotificationThread
		h, err := c.getJSON(ctx, "list the bot's notifications", "/notifications", q, &list)
		if err != nil {
			return nil, err
		}
		for _, n := range list {
			if ch, ok := notificationChange(n); ok {
				out = append(out, ch)
			}
		}
		seen += len(list)
		if !morePages(h, page, len(list), seen) {
			break
		}
	}
	assigned, err := c.AssignedIssues(ctx, since, 0)
	if err != nil {
		return nil, err
	}
	for _, is := range assigned {
		out = append(out, forge.Change{Ref: is.Ref, UpdatedAt: is.UpdatedAt, Source: "assigned issue"})
	}
	return out, nil
}

// notificationChange reads the issue or pull request a notification thread is about from its
// repository and its subject's API URL (…/repos/{o}/{r}/issues/{index} or …/pulls/{index});
// false for another subject (a commit, a repository) or a URL it cannot read.
func notificationChange(n *gitea.NotificationThread) (forge.Change, bool) {
	if n == nil || n.Subject == nil || n.Repository == nil {
		return forge.Change{}, false
	}
	mr := false
	switch n.Subject.Type {
	case gitea.NotifySubjectIssue:
	case gitea.NotifySubjectPull:
		mr = true
	default:
		return forge.Change{}, false
	}
	u, err := url.Parse(n.Subject.URL)
	if err != nil {
		return forge.Change{}, false
	}
	number, err := strconv.ParseInt(path.Base(u.Path), 10, 64)
	if err != nil || number <= 0 || !strings.Contains(u.Path, "/repos/") {
		return forge.Change{}, false
	}
	return forge.Change{
		Ref:       forge.IssueRef{Repo: n.Repository.FullName, Number: number, MergeRequest: mr},
		UpdatedAt: n.UpdatedAt, Source: fmt.Sprintf("notification %d", n.ID),
	}, true
}
