package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/demo"
	"github.com/alfred-bot/alfred/internal/doctor"
)

// demoMarker marks a directory alfred demo made, which the next demo may empty.
const demoMarker = ".alfred-demo"

// demoOptions are the flags of "alfred demo".
type demoOptions struct {
	dir, listen, adminListen, forgeListen, image, script string
	// transport is the demo forge's forges[].transport: "webhook" (the stand-in sends
	// deliveries) or "poll" (it has no webhook; Alfred polls it every demoPollInterval).
	transport string
}

// demoPollInterval is the demo forge's poll_interval with --transport poll: short, so that
// each step of the demo waits a couple of seconds, not the default 15.
const demoPollInterval = 2 * time.Second

// demoRun is a running demo: the forge, Alfred serving, and where each is.
type demoRun struct {
	forge                *demo.Forge
	srv                  *server
	forgeURL, pagesURL   string
	dir, logPath         string
	serveDone, forgeDone chan error
	stop                 context.CancelFunc
}

// demoCommand implements "alfred demo" (start it) and "alfred demo answer|validate" (act as
// the human on a running demo's page).
func (a *app) demoCommand(ctx context.Context, args []string) error {
	if len(args) > 0 && (args[0] == "answer" || args[0] == "validate") {
		return a.demoAct(ctx, args[0], args[1:])
	}
	fs := a.flagSet("demo", "[--dir alfred-demo] [--listen ADDR] [--admin-listen ADDR] [--forge-listen ADDR] [--image IMAGE] [--script FILE] [--transport webhook|poll]\n"+
		"       alfred demo answer [--url URL] q1 b [q2 a …]   answer Alfred's questions as alice\n"+
		"       alfred demo validate [--url URL]              validate Alfred's plan as alice")
	var o demoOptions
	fs.StringVar(&o.dir, "dir", "alfred-demo", "the demo's directory (emptied at start): configuration, secrets, store, repository, Alfred's log")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "Alfred's webhook address")
	fs.StringVar(&o.adminListen, "admin-listen", "127.0.0.1:8081", "Alfred's pages (/ui) and metrics")
	fs.StringVar(&o.forgeListen, "forge-listen", strings.TrimPrefix(demo.DefaultURL, "http://"), "the stand-in forge and the demo's page")
	fs.StringVar(&o.image, "image", "alfred/script-agent:dev", "the script agent's image (make script-agent-image builds it offline)")
	fs.StringVar(&o.script, "script", "deploy/demo/script.yaml", "the script agent's answers per phase")
	fs.StringVar(&o.transport, "transport", "webhook", "how the forge's changes reach Alfred: webhook (the stand-in sends deliveries) or poll (no webhook on the stand-in; Alfred polls it every "+demoPollInterval.String()+")")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || (o.transport != config.TransportWebhook && o.transport != config.TransportPoll) {
		fs.Usage()
		return errUsage
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d, err := a.startDemo(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, `
Alfred's demo is running: a stand-in Forgejo, Alfred and the script agent (Docker), all on this machine.
  the issue (you are alice: answer, validate):  %s/
  Alfred's pages, live (the issue page signs you in; token in %s): %s
  Alfred's log:                                 %s
  transport:                                    %s
Ctrl-C stops it.

`, d.forgeURL, filepath.Join(d.dir, "admin.token"), d.pagesURL, d.logPath, demoTransportLine(o.transport))
	if err := d.forge.Open(ctx); err != nil {
		d.stop()
		return errors.Join(err, d.wait())
	}
	go d.forge.Run(ctx)
	err = d.wait()
	if ctx.Err() != nil { // Ctrl-C
		fmt.Fprintf(a.stdout, "demo: stopped. Its files stay in %s until the next demo empties it; "+
			"the agent's image stays too (docker image rm %s removes it).\n", d.dir, o.image)
	}
	return err
}

// startDemo prepares the demo's directory, starts the forge and Alfred on it (after the doctor
// passed) and returns once Alfred answers its webhooks. The issue is not filed yet
// (demoRun.forge.Open).
func (a *app) startDemo(ctx context.Context, o demoOptions) (*demoRun, error) {
	dir, err := prepareDemoDir(o.dir)
	if err != nil {
		return nil, err
	}
	script, err := filepath.Abs(o.script)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("the script agent's answers: %w (run alfred demo from the repository's root, or give --script)", err)
	}
	forgeLn, err := net.Listen("tcp", o.forgeListen)
	if err != nil {
		return nil, fmt.Errorf("the demo's forge: listen on %s: %w (another demo running? --forge-listen changes it)", o.forgeListen, err)
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		_ = forgeLn.Close()
		return nil, fmt.Errorf("alfred: listen on %s: %w (another Alfred running? --listen changes it)", o.listen, err)
	}
	closeLns := func() { _ = forgeLn.Close(); _ = ln.Close() }
	hookURL := "http://" + ln.Addr().String() + "/webhooks/forgejo"
	d := &demoRun{dir: dir, logPath: filepath.Join(dir, "alfred.log"),
		forgeURL: "http://" + forgeLn.Addr().String(), pagesURL: "http://" + o.adminListen + "/ui/",
		serveDone: make(chan error, 1), forgeDone: make(chan error, 1)}
	secret, adminToken := randomHex(32), randomHex(32)
	d.forge, err = demo.New(demo.Config{Dir: dir, URL: d.forgeURL, HookURL: hookURL, HookSecret: secret,
		PagesURL: d.pagesURL, AdminToken: adminToken, Out: a.stdout, NoWebhook: o.transport == config.TransportPoll})
	if err != nil {
		closeLns()
		return nil, err
	}
	cfgPath := filepath.Join(dir, "alfred.yaml")
	files := map[string]string{"webhook.secret": secret, "admin.token": adminToken, "forgejo.token": d.forge.Token()}
	if o.transport == config.TransportPoll {
		delete(files, "webhook.secret") // a polled forge has no webhook to sign
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			closeLns()
			return nil, err
		}
	}
	if err := os.WriteFile(cfgPath, []byte(demoConfig(ln.Addr().String(), o.adminListen, d.forgeURL, o.image, script, o.transport)), 0o600); err != nil {
		closeLns()
		return nil, err
	}
	forgeSrv := &http.Server{Handler: d.forge.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { d.forgeDone <- forgeSrv.Serve(forgeLn) }()
	runCtx, stop := context.WithCancel(ctx)
	d.stop = func() {
		stop()
		_ = forgeSrv.Close()
	}
	fail := func(err error) (*demoRun, error) {
		d.stop()
		_ = ln.Close()
		return nil, err
	}

	cfg, err := a.loadConfig(cfgPath)
	if err != nil {
		return fail(err)
	}
	logFile, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	// The doctor first, as make run does for a real forge: a missing image or Docker engine
	// is told with its fix before anything runs.
	dc, closeAll := a.doctorConfig(ctx, cfgPath, cfg)
	rep := doctor.Run(ctx, dc)
	closeAll()
	var report bytes.Buffer
	_ = rep.Write(&report)
	_, _ = logFile.Write(report.Bytes())
	if rep.Blocking() {
		_ = logFile.Close()
		fmt.Fprint(a.stderr, a.censor.String(report.String()))
		return fail(errors.New("the demo cannot start: fix the failures above (each says how), then run it again"))
	}
	fmt.Fprintf(a.stdout, "demo: alfred doctor passed on the demo's configuration (%s)\n", cfgPath)
	for _, x := range rep.Results {
		if strings.HasSuffix(x.Check, ": transport") {
			fmt.Fprintf(a.stdout, "demo: alfred doctor: %s: %s\n", x.Check, x.Detail)
		}
	}

	log := slog.New(cfg.Censor().Handler(slog.NewTextHandler(logFile, nil)))
	srv, err := newServer(runCtx, cfg, log)
	if err != nil {
		_ = logFile.Close()
		return fail(err)
	}
	d.srv = srv
	go func() {
		err := srv.Serve(runCtx, ln)
		d.serveDone <- errors.Join(err, srv.Close(), logFile.Close())
	}()
	// Ready once the start-up recovery and rebuild are done: the assignment must not reach a
	// store the rebuild has not looked at yet.
	ready := "http://" + ln.Addr().String() + "/readyz"
	for {
		resp, err := http.Get(ready)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		select {
		case err := <-d.serveDone:
			d.stop()
			return nil, fmt.Errorf("alfred stopped (its log: %s): %w", d.logPath, err)
		case <-ctx.Done():
			d.stop()
			return nil, errors.Join(ctx.Err(), <-d.serveDone)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// wait returns when Alfred has stopped (the context ended, or it failed), with the forge
// stopped too.
func (d *demoRun) wait() error {
	err := <-d.serveDone
	d.stop()
	if ferr := <-d.forgeDone; !errors.Is(ferr, http.ErrServerClosed) {
		err = errors.Join(err, ferr)
	}
	return err
}

// prepareDemoDir makes dir empty and marked as the demo's: a directory an earlier demo made is
// emptied (a demo starts from nothing), any other non-empty one is refused. It returns dir
// as an absolute path.
func prepareDemoDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(abs, demoMarker)); err != nil {
			return "", fmt.Errorf("%s holds files the demo did not make: give --dir an empty or new directory", abs)
		}
		if err := os.RemoveAll(abs); err != nil {
			return "", fmt.Errorf("empty the last demo's %s: %w", abs, err)
		}
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return "", err
	}
	return abs, os.WriteFile(filepath.Join(abs, demoMarker), []byte("made by alfred demo; emptied by the next one\n"), 0o600)
}

// demoTransportLine says, on the demo's console, how the stand-in's changes reach Alfred.
func demoTransportLine(transport string) string {
	if transport == config.TransportPoll {
		return fmt.Sprintf("poll: the stand-in has no webhook and sends no delivery; Alfred asks it for the bot's notifications every %s", demoPollInterval)
	}
	return "webhook: the stand-in sends signed deliveries to Alfred (--transport poll: none, Alfred polls)"
}

// demoConfig is the demo's configuration: the stand-in forge, the script agent in every
// phase, the embedded store, CI read every 2 s and auto-merge on with no approval awaited
// (nobody reviews in the demo), so that the issue goes from
// assignment to a merged pull request with only the human's two steps. With transport "poll"
// the forge is polled every demoPollInterval and has no webhook secret. Paths are relative to
// the configuration file.
func demoConfig(listen, adminListen, forgeURL, image, script, transport string) string {
	hook := "webhook_secret_file: ./webhook.secret"
	if transport == config.TransportPoll {
		hook = fmt.Sprintf("transport: poll\n    poll_interval: %s", demoPollInterval)
	}
	return fmt.Sprintf(`# Written by alfred demo (emptied by the next one). The forge is the demo's stand-in.
listen: %s
public_url: http://%s
data_dir: ./data
forges:
  - name: forgejo
    kind: forgejo
    base_url: %s
    token_file: ./forgejo.token
    %s
    bot_user: %s
    repositories: [%s]
agents:
  - name: script
    adapter: script
    image: %s
    script: %s
phases:
  default: script
lifecycle:
  question_deadline: 1h
  ci_poll: 2s
  auto_merge: true
  auto_merge_min_approvals: 0
admin:
  listen: %s
  token_file: ./admin.token
`, listen, listen, forgeURL, hook, demo.Bot, demo.Repo, image, script, adminListen)
}

// demoAct implements "alfred demo answer" and "alfred demo validate": a POST to the running
// demo's page, which answers a line.
func (a *app) demoAct(ctx context.Context, verb string, args []string) error {
	synopsis := "[--url URL]"
	if verb == "answer" {
		synopsis = "[--url URL] q1 b [q2 a …] | \"q1: b\""
	}
	fs := a.flagSet("demo "+verb, synopsis)
	base := fs.String("url", demo.DefaultURL, "the demo's page (alfred demo --forge-listen)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	form := url.Values{}
	switch {
	case verb == "validate" && len(pos) == 0:
	case verb == "answer" && len(pos) == 1 && strings.Contains(pos[0], ":"):
		form.Set("text", pos[0])
	case verb == "answer" && len(pos) > 0 && len(pos)%2 == 0:
		var lines []string
		for i := 0; i < len(pos); i += 2 {
			lines = append(lines, pos[i]+": "+pos[i+1])
		}
		form.Set("text", strings.Join(lines, "\n"))
	default:
		fs.Usage()
		return errUsage
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(*base, "/")+"/"+verb, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no demo answers at %s (start it with make run, or alfred demo): %w", *base, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("demo %s: %s", verb, strings.TrimSpace(string(msg)))
	}
	fmt.Fprintf(a.stdout, "demo %s: %s", verb, msg)
	return nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
