package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// Headers that replay never copies from a fixture: transport headers that net/http sets
// itself, and the fixture's own signatures, which replay recomputes.
var replayDropped = []string{
	"Host", "Content-Length", "Accept-Encoding", "Connection", "Transfer-Encoding",
	"X-Forgejo-Signature", "X-Gitea-Signature", "X-Gogs-Signature", "X-Hub-Signature",
	"X-Hub-Signature-256", "X-Gitlab-Token",
}

// legacyDelivery are delivery id headers of older forges: replay gives them the fresh id too
// when the fixture has them.
var legacyDelivery = []string{"X-Gogs-Delivery", "X-GitHub-Delivery"}

// headerList is a repeatable -H 'Name: value' flag.
type headerList []string

// String implements flag.Value.
func (h *headerList) String() string { return strings.Join(*h, ", ") }

// Set implements flag.Value.
func (h *headerList) Set(v string) error {
	if _, _, ok := strings.Cut(v, ":"); !ok {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	*h = append(*h, v)
	return nil
}

// replay implements "alfred replay": re-sign a captured delivery and POST it.
func (a *app) replay(ctx context.Context, args []string) error {
	fs := a.flagSet("replay", "--url URL --secret-file FILE [flags] FIXTURE.json")
	target := fs.String("url", "", "webhook URL, e.g. http://127.0.0.1:8080/webhooks/forgejo (required)")
	secretFile := fs.String("secret-file", "", "file holding the forge's webhook secret (required)")
	kindFlag := fs.String("kind", "", "forgejo or gitlab; default: gitlab if the fixture has X-Gitlab-Event, else forgejo")
	keep := fs.Bool("keep-delivery", false, "keep the fixture's delivery id instead of a fresh one")
	timeout := fs.Duration("timeout", 30*time.Second, "request timeout")
	var extra headerList
	fs.Var(&extra, "H", "extra header 'Name: value', overriding the fixture's (repeatable)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *target == "" || *secretFile == "" {
		fs.Usage()
		return errUsage
	}

	header, body, err := recorded.Load(pos[0])
	if err != nil {
		return fmt.Errorf("read fixture: %w", err)
	}
	for _, k := range replayDropped {
		header.Del(k)
	}
	if header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/json")
	}
	for _, h := range extra {
		k, v, _ := strings.Cut(h, ":")
		header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	secret, err := config.ReadSecretFile(*secretFile)
	if err != nil {
		return err
	}
	a.censor = censor.New(censor.Config{Secrets: []string{secret.Reveal()}})

	kind := forge.Kind(*kindFlag)
	if kind == "" {
		kind = forge.KindForgejo
		if header.Get("X-Gitlab-Event") != "" {
			kind = forge.KindGitLab
		}
	}
	if !kind.Valid() {
		return fmt.Errorf("--kind %q: want forgejo or gitlab", kind)
	}
	if err := sign(header, kind, body, secret, !*keep); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("post fixture: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	fmt.Fprintf(a.stdout, "%s %s\n", resp.Proto, resp.Status)
	if len(respBody) > 0 {
		fmt.Fprintf(a.stdout, "%s\n", bytes.TrimRight(respBody, "\n"))
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("server answered %s", resp.Status)
	}
	return nil
}

// sign sets the authentication headers of kind for body and, if fresh, a new delivery id.
func sign(h http.Header, kind forge.Kind, body []byte, secret config.Secret, fresh bool) error {
	id := ""
	if fresh {
		id = uuid.NewString()
	}
	switch kind {
	case forge.KindForgejo:
		forgejo.SignDelivery(h, secret.Reveal(), body, id)
	case forge.KindGitLab:
		gitlab.SignDelivery(h, secret.Reveal(), id)
	default:
		return fmt.Errorf("cannot sign for forge kind %q", kind)
	}
	if id == "" {
		return nil
	}
	for _, name := range legacyDelivery {
		if h.Get(name) != "" {
			h.Set(name, id)
		}
	}
	return nil
}
