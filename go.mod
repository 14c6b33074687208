module github.com/alfred-bot/alfred

go 1.26.8

require (
	code.gitea.io/sdk/gitea v0.25.1 // indirect
	github.com/42wim/httpsig v1.2.4 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/davidmz/go-pageant v1.0.2 // indirect
	github.com/docker/docker v28.5.2+incompatible // indirect
	github.com/go-chi/chi/v5 v5.5.0 // indirect
	github.com/go-fed/httpsig v1.1.0 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/google/go-querystring v1.2.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-retryablehttp v0.7.8 // indirect
	github.com/hashicorp/go-version v1.9.0 // indirect
	github.com/jmoiron/sqlx v1.4.0 // indirect
	github.com/lib/pq v1.12.3 // indirect
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/pressly/goose/v3 v3.30.0 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	gitlab.com/gitlab-org/api/client-go/v2 v2.64.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
