// Package forgehttp is the plumbing that the GitLab and Forgejo packages share: the retry policy
// of their API clients (which answers are retried, how long to wait), the mapping of an HTTP
// status to the forge package's sentinel errors, the error type that keeps a token out of error
// texts, small helpers both clients need, reading webhook headers, and the Forgejo/Gitea webhook
// signature (Sign). It holds no forge-specific API calls.
package forgehttp
