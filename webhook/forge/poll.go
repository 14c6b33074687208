package forge

import (
	"context"
	"time"
)

// Change is one issue or merge request that the forge says changed for the bot account since a
// poll's cursor (the polling transport, spec/transport.md).
type Change struct {
	// Ref is the issue or merge request (Ref.Forge is left empty: the caller knows the
	// configured forge name).
	Ref IssueRef `json:"ref"`
	// UpdatedAt is the forge's time of the change (Forgejo/Gitea notification updated_at, GitLab
	// to-do created_at, an issue's or merge request's updated_at); the poll's next cursor is the
	// newest of them.
	UpdatedAt time.Time `json:"updated_at"`
	// Source names what reported it, with the forge's own id: "notification 12", "todo 7",
	// "assigned issue", "authored merge request". For logs.
	Source string `json:"source"`
}

// Poller is the part of a forge client the polling transport uses: what changed for the bot,
// in a constant number of requests (plus pages) whatever the number of repositories.
type Poller interface {
	// Changes lists the issues and merge requests that changed for the bot at or after since
	// (zero: everything the forge keeps), following pages, in no particular order; the same
	// thread may appear more than once. Forgejo/Gitea: GET /notifications (all, since,
	// subject types Issue and Pull) and the bot's assigned issues (a label change makes no
	// notification); GitLab: GET /todos, the bot's assigned issues and its merge requests
	// (updated_after). Errors as for Forge (ErrUnavailable after the client's retries of a
	// 429 or 5xx, ErrForbidden for a token that may not read them).
	Changes(ctx context.Context, since time.Time) ([]Change, error)
}
