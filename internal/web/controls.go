package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// Controls is what the pages' forms change (spec/operations.md, "Controls"). by names who
// asked (Config.Actor). cmd wires the store (pause, resume, cancel, each recorded in the
// mailbox's timeline with by) and the workers (drain, resuming wakes them).
type Controls interface {
	// PauseMailbox stops the workers from claiming mailbox id (its events are still stored);
	// ResumeMailbox lets them again, the stored events applied in order. Both return an error
	// wrapping ErrNotFound for an unknown mailbox.
	PauseMailbox(ctx context.Context, id int64, by string) error
	ResumeMailbox(ctx context.Context, id int64, by string) error
	// PauseProject and ResumeProject do the same for every mailbox of repository repo on the
	// forge named forgeName.
	PauseProject(ctx context.Context, forgeName, repo, by string) error
	ResumeProject(ctx context.Context, forgeName, repo, by string) error
	// CancelRun stops run id: its container is stopped and removed, the issue told once. An
	// error wrapping ErrNotFound when no such run is running.
	CancelRun(ctx context.Context, id int64, by string) error
	// Drain stops (on) or lets again every replica of the installation claim new work (a row
	// in the store each replica reads each second); the passes in progress finish. Draining
	// reports whether it is on, as this replica last read it.
	Drain(ctx context.Context, on bool, by string) error
	Draining() bool
	// PauseAll stops (on) or lets again every claim of every mailbox on every replica (each
	// claim reads it); the events are still stored.
	PauseAll(ctx context.Context, on bool, by string) error
	// Installation reads the installation-wide pause and the replicas seen lately.
	Installation(ctx context.Context) (Installation, error)
}

// Installation is the installation-wide state the index page shows: the pause of all claims
// and the replicas sharing the store.
type Installation struct {
	Paused   bool
	PausedBy string
	// Replicas are the Alfred processes seen in the last minutes, by id.
	Replicas []Replica
}

// Replica is one Alfred process sharing the store, as it last recorded itself: SeenAt at the
// store's clock, Draining once it follows the drain, Drained once it also has no claim or
// pass in progress.
type Replica struct {
	ID                string
	SeenAt            time.Time
	Draining, Drained bool
}

// CSRFCookie holds the browser's random CSRF session id; the forms carry its HMAC under
// Config.CSRFKey in the field CSRFField.
const (
	CSRFCookie = "alfred_csrf"
	CSRFField  = "csrf"
)

// csrfSession returns the browser's CSRF session id, setting a new one (a cookie, HttpOnly,
// SameSite Strict, under Prefix) when the request has none or a malformed one.
func (h *Handler) csrfSession(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(CSRFCookie); err == nil && validSession(c.Value) {
		return c.Value
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	id := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: CSRFCookie, Value: id, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	r.AddCookie(&http.Cookie{Name: CSRFCookie, Value: id})
	return id
}

func validSession(v string) bool {
	b, err := hex.DecodeString(v)
	return err == nil && len(b) == 16
}

// csrfToken is the token of session id: HMAC-SHA256 under the key, hex.
func (h *Handler) csrfToken(id string) string {
	mac := hmac.New(sha256.New, h.cfg.CSRFKey)
	mac.Write([]byte("alfred csrf\x00" + id))
	return hex.EncodeToString(mac.Sum(nil))
}

// checkCSRF reports whether a form carries the token of the browser's CSRF session, compared
// in constant time.
func (h *Handler) checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(CSRFCookie)
	if err != nil || !validSession(c.Value) {
		return false
	}
	got, err := hex.DecodeString(r.PostFormValue(CSRFField))
	if err != nil {
		return false
	}
	want, _ := hex.DecodeString(h.csrfToken(c.Value))
	return hmac.Equal(got, want)
}

// actor names who sent r: Config.Actor's answer, else "operator (session <first 8 of the CSRF
// session id>) from <client address>" — the page login is one shared token, with no user name.
func (h *Handler) actor(r *http.Request) string {
	if h.cfg.Actor != nil {
		if a := h.cfg.Actor(r); a != "" {
			return a
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	session := "?"
	if c, err := r.Cookie(CSRFCookie); err == nil && validSession(c.Value) {
		session = c.Value[:8]
	}
	return fmt.Sprintf("operator (session %s) from %s", session, host)
}

// control wraps a form's action: it answers 404 without Controls, 403 without the CSRF token
// (or from another site: http.CrossOriginProtection), then runs act with the actor and
// redirects (303) to where act says.
func (h *Handler) control(act func(r *http.Request, by string) (back string, err error)) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "refused: a cross-site request", http.StatusForbidden)
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.Controls == nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		if !h.checkCSRF(r) {
			h.cfg.Logger.WarnContext(r.Context(), "web: a control without its CSRF token refused", "path", r.URL.Path)
			http.Error(w, "refused: the form's CSRF token is missing or wrong; reload the page and try again", http.StatusForbidden)
			return
		}
		by := h.actor(r)
		back, err := act(r, by)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			h.cfg.Logger.WarnContext(r.Context(), "web: control failed", "path", r.URL.Path, "err", err)
			http.Error(w, "cannot change the store", http.StatusServiceUnavailable)
			return
		}
		h.cfg.Logger.InfoContext(r.Context(), "web: operator control", "path", r.URL.Path, "by", by)
		http.Redirect(w, r, back, http.StatusSeeOther)
	}))
}

// routeControls adds the forms' POST routes to r.
func (h *Handler) routeControls(r chi.Router) {
	mailboxBack := func(id int64) string { return fmt.Sprintf("%s/mailboxes/%d", Prefix, id) }
	r.Method(http.MethodPost, "/mailboxes/{id}/pause", h.control(func(r *http.Request, by string) (string, error) {
		id, err := pathID(r)
		if err == nil {
			err = h.cfg.Controls.PauseMailbox(r.Context(), id, by)
		}
		return mailboxBack(id), err
	}))
	r.Method(http.MethodPost, "/mailboxes/{id}/resume", h.control(func(r *http.Request, by string) (string, error) {
		id, err := pathID(r)
		if err == nil {
			err = h.cfg.Controls.ResumeMailbox(r.Context(), id, by)
		}
		return mailboxBack(id), err
	}))
	project := func(pause bool) http.Handler {
		return h.control(func(r *http.Request, by string) (string, error) {
			forgeName, repo := r.PostFormValue("forge"), strings.Trim(r.PostFormValue("repo"), "/")
			if forgeName == "" || repo == "" {
				return "", fmt.Errorf("forge and repo are required: %w", ErrNotFound)
			}
			var err error
			if pause {
				err = h.cfg.Controls.PauseProject(r.Context(), forgeName, repo, by)
			} else {
				err = h.cfg.Controls.ResumeProject(r.Context(), forgeName, repo, by)
			}
			back := Prefix + "/"
			if id, perr := strconv.ParseInt(r.PostFormValue("back"), 10, 64); perr == nil && id > 0 {
				back = mailboxBack(id)
			}
			return back, err
		})
	}
	r.Method(http.MethodPost, "/projects/pause", project(true))
	r.Method(http.MethodPost, "/projects/resume", project(false))
	r.Method(http.MethodPost, "/runs/{id}/cancel", h.control(func(r *http.Request, by string) (string, error) {
		id, err := pathID(r)
		if err == nil {
			err = h.cfg.Controls.CancelRun(r.Context(), id, by)
		}
		return fmt.Sprintf("%s/runs/%d", Prefix, id), err
	}))
	r.Method(http.MethodPost, "/drain", h.control(func(r *http.Request, by string) (string, error) {
		return Prefix + "/", h.cfg.Controls.Drain(r.Context(), r.PostFormValue("on") == "1", by)
	}))
	r.Method(http.MethodPost, "/pause-all", h.control(func(r *http.Request, by string) (string, error) {
		return Prefix + "/", h.cfg.Controls.PauseAll(r.Context(), r.PostFormValue("on") == "1", by)
	}))
}

// formData is what a page's forms need: whether the controls are on, the CSRF token; on the
// index page, the installation (Installation nil elsewhere, or when it cannot be read).
type formData struct {
	Controls     bool
	CSRF         string
	Draining     bool
	Installation *Installation
}

func (h *Handler) forms(w http.ResponseWriter, r *http.Request) formData {
	if h.cfg.Controls == nil {
		return formData{}
	}
	return formData{Controls: true, CSRF: h.csrfToken(h.csrfSession(w, r)), Draining: h.cfg.Controls.Draining()}
}

// installation adds the installation's pause and replicas to f (the index page's forms); a
// store that cannot be read leaves them out and logs why.
func (h *Handler) installation(r *http.Request, f *formData) {
	if !f.Controls {
		return
	}
	inst, err := h.cfg.Controls.Installation(r.Context())
	if err != nil {
		h.cfg.Logger.WarnContext(r.Context(), "web: cannot read the installation controls", "err", err)
		return
	}
	f.Installation = &inst
}
