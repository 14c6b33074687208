package mailbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// ShadowKind names what a shadow write would have done on the forge.
type ShadowKind string

// The writes a shadow forge records (spec/operations.md, "Shadow mode"), one per forge write
// call, and the one the machine records itself (ShadowRun).
const (
	ShadowComment      ShadowKind = "comment"       // a comment posted (Body; CommentID its synthetic id)
	ShadowEditComment  ShadowKind = "edit_comment"  // a comment edited (CommentID, Body)
	ShadowIssueBody    ShadowKind = "issue_body"    // the issue description replaced (Body)
	ShadowLabels       ShadowKind = "labels"        // labels added (Add) and removed (Remove)
	ShadowEnsureLabels ShadowKind = "ensure_labels" // repository labels created where missing (Add)
	ShadowAssignees    ShadowKind = "assignees"     // assignees added (Add) and removed (Remove)
	ShadowMergeRequest ShadowKind = "merge_request" // a merge request opened (Body; Detail title, branches)
	ShadowReview       ShadowKind = "review"        // a review posted (Body; Detail event and inline comments)
	ShadowReply        ShadowKind = "reply"         // a reply in a review thread (Body; Detail thread)
	ShadowResolve      ShadowKind = "resolve"       // a review thread resolved (Detail thread)
	ShadowMerge        ShadowKind = "merge"         // a merge request merged (Detail method, head)
	// ShadowRun is a run shadow mode does not start: a phase that pushes (Detail phase).
	ShadowRun ShadowKind = "run"
)

// ShadowWrite is one write Alfred would have made to the forge for a project in shadow mode.
type ShadowWrite struct {
	// ID orders the writes; a created comment, reply, review or merge request has the
	// synthetic id -ID.
	ID int64
	// Target is the issue or merge request written to; Number 0 for a write to the repository
	// (ShadowEnsureLabels).
	Target forge.IssueRef
	Kind   ShadowKind
	// CommentID is the comment created (negative, synthetic) or edited (a forge id for a
	// comment posted before the project was in shadow).
	CommentID int64
	// Body is the text written, as the forge would have received it.
	Body string
	// Add and Remove are the labels or assignees added and removed.
	Add, Remove []string
	// Detail holds what else the write said (a merge request's title and branches, a review's
	// verdict and inline comments, a merge's method).
	Detail map[string]string
	At     time.Time
}

// ShadowLog keeps the writes of shadow mode. The store implements it (the shadow_writes table);
// mailboxtest has an in-memory one.
type ShadowLog interface {
	// RecordShadow appends w (ID and At are set by the store, At from its clock when zero),
	// attached to the mailbox of w.Target when there is one, and returns its ID (> 0). An edit
	// (ShadowEditComment) replaces the earlier edit of the same comment on the same target, so
	// the log keeps one entry per comment, its latest edit, however often it is edited (the
	// status comment is edited at every pass while a run is held).
	RecordShadow(ctx context.Context, w ShadowWrite) (int64, error)
	// ShadowWrites returns the writes recorded for target (Forge, Repo, Number, MergeRequest),
	// oldest first.
	ShadowWrites(ctx context.Context, target forge.IssueRef) ([]ShadowWrite, error)
}

// ShadowConfig configures Shadow.
type ShadowConfig struct {
	// Forge is the configured forge name, for the writes whose call names a repository only.
	Forge string
	// BotLogin is the bot's login: the author of the comments a read shows from the log.
	BotLogin string
	// On reports whether repo is in shadow mode now (the scoped setting); it is asked on every
	// call, so a switch takes effect at the next one.
	On func(repo string) bool
	// Log keeps the writes.
	Log ShadowLog
}

// Shadow wraps f so that, for a repository in shadow mode, no call writes to the forge: each
// write is recorded in cfg.Log and answered as the forge would (a created comment, reply,
// review or merge request gets a negative synthetic id), and the reads the machine relies on
// show the recorded writes over the forge's answer: Issue (labels, assignees, description),
// Comments and CommentsSince (the comments posted, and the edits), MergeRequest (one opened in
// shadow). For a repository not in shadow every call is f's, so switching a project to live
// replays nothing. The result keeps f's optional interfaces (forge.Reviews, forge.Merger).
// Shadow sits under GuardPosts, so what it records is what the forge would have received. It
// panics when cfg.Log is nil: a write in shadow mode must go somewhere other than the forge.
func Shadow(f forge.Forge, cfg ShadowConfig) forge.Forge {
	if cfg.Log == nil {
		panic("mailbox: Shadow needs a ShadowLog")
	}
	s := &shadowForge{Forge: f, cfg: cfg}
	var rv forge.Reviews
	if r, ok := f.(forge.Reviews); ok {
		rv = &shadowReviews{Reviews: r, s: s}
	}
	var mg forge.Merger
	if m, ok := f.(forge.Merger); ok {
		mg = &shadowMerger{Merger: m, s: s}
	}
	return withOptional(s, rv, mg)
}

type shadowForge struct {
	forge.Forge
	cfg ShadowConfig
}

func (s *shadowForge) on(repo string) bool { return s.cfg.On != nil && s.cfg.On(repo) }

// target names ref on the configured forge.
func (s *shadowForge) target(ref forge.IssueRef) forge.IssueRef {
	ref.Forge = cmp.Or(ref.Forge, s.cfg.Forge)
	return ref
}

func (s *shadowForge) record(ctx context.Context, w ShadowWrite) (int64, error) {
	w.Target = s.target(w.Target)
	id, err := s.cfg.Log.RecordShadow(ctx, w)
	if err != nil {
		return 0, fmt.Errorf("record a shadow %s: %w", w.Kind, err)
	}
	return id, nil
}

func (s *shadowForge) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	if !s.on(ref.Repo) {
		return s.Forge.SetIssueBody(ctx, ref, body)
	}
	_, err := s.record(ctx, ShadowWrite{Target: ref, Kind: ShadowIssueBody, Body: body})
	return err
}

func (s *shadowForge) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	if !s.on(ref.Repo) {
		return s.Forge.Comment(ctx, ref, body)
	}
	id, err := s.record(ctx, ShadowWrite{Target: ref, Kind: ShadowComment, Body: body})
	return -id, err
}

func (s *shadowForge) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	if !s.on(ref.Repo) {
		return s.Forge.EditComment(ctx, ref, id, body)
	}
	_, err := s.record(ctx, ShadowWrite{Target: ref, Kind: ShadowEditComment, CommentID: id, Body: body})
	return err
}

func (s *shadowForge) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	if !s.on(ref.Repo) {
		return s.Forge.SetLabels(ctx, ref, add, remove)
	}
	_, err := s.record(ctx, ShadowWrite{Target: ref, Kind: ShadowLabels, Add: add, Remove: remove})
	return err
}

func (s *shadowForge) EnsureLabels(ctx context.Context, repo string, names []string) error {
	if !s.on(repo) {
		return s.Forge.EnsureLabels(ctx, repo, names)
	}
	_, err := s.record(ctx, ShadowWrite{Target: forge.IssueRef{Repo: repo}, Kind: ShadowEnsureLabels, Add: names})
	return err
}

func (s *shadowForge) SetAssignees(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	if !s.on(ref.Repo) {
		return s.Forge.SetAssignees(ctx, ref, add, remove)
	}
	_, err := s.record(ctx, ShadowWrite{Target: ref, Kind: ShadowAssignees, Add: add, Remove: remove})
	return err
}

func (s *shadowForge) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	if !s.on(repo) {
		return s.Forge.CreateMergeRequest(ctx, repo, mr)
	}
	id, err := s.record(ctx, ShadowWrite{Target: forge.IssueRef{Repo: repo}, Kind: ShadowMergeRequest, Body: mr.Body,
		Detail: map[string]string{"title": mr.Title, "source_branch": mr.SourceBranch, "target_branch": mr.TargetBranch}})
	if err != nil {
		return nil, err
	}
	return &forge.MergeRequest{Number: -id, Title: mr.Title, Body: mr.Body, SourceBranch: mr.SourceBranch,
		TargetBranch: mr.TargetBranch, State: "open", MergeStatus: forge.MergeStatusMergeable}, nil
}

// MergeRequest answers a merge request opened in shadow (a negative number) from the log.
func (s *shadowForge) MergeRequest(ctx context.Context, repo string, number int64) (*forge.MergeRequest, error) {
	if number >= 0 || !s.on(repo) {
		return s.Forge.MergeRequest(ctx, repo, number)
	}
	ws, err := s.cfg.Log.ShadowWrites(ctx, s.target(forge.IssueRef{Repo: repo}))
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.Kind == ShadowMergeRequest && w.ID == -number {
			return &forge.MergeRequest{Number: number, Title: w.Detail["title"], Body: w.Body,
				SourceBranch: w.Detail["source_branch"], TargetBranch: w.Detail["target_branch"], State: "open",
				MergeStatus: forge.MergeStatusMergeable}, nil
		}
	}
	return nil, fmt.Errorf("shadow merge request %d: %w", number, forge.ErrNotFound)
}

// Issue is the forge's issue with the shadow writes applied in order: labels and assignees
// added and removed, the last description written.
func (s *shadowForge) Issue(ctx context.Context, ref forge.IssueRef) (*forge.Issue, error) {
	is, err := s.Forge.Issue(ctx, ref)
	if err != nil || !s.on(ref.Repo) {
		return is, err
	}
	ws, err := s.cfg.Log.ShadowWrites(ctx, s.target(ref))
	if err != nil {
		return nil, err
	}
	out := *is
	out.Labels, out.Assignees = slices.Clone(is.Labels), slices.Clone(is.Assignees)
	for _, w := range ws {
		switch w.Kind {
		case ShadowLabels:
			out.Labels = applyChange(out.Labels, w.Add, w.Remove)
		case ShadowAssignees:
			out.Assignees = applyChange(out.Assignees, w.Add, w.Remove)
		case ShadowIssueBody:
			out.Body = w.Body
		}
	}
	return &out, nil
}

// applyChange removes remove from list, then adds what of add it lacks (names compare without
// case, as the forges' labels do).
func applyChange(list, add, remove []string) []string {
	list = slices.DeleteFunc(list, func(l string) bool { return containsFold(remove, l) })
	for _, a := range add {
		if !containsFold(list, a) {
			list = append(list, a)
		}
	}
	return list
}

func (s *shadowForge) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	cs, err := s.Forge.Comments(ctx, ref)
	if err != nil || !s.on(ref.Repo) {
		return cs, err
	}
	return s.overlay(ctx, ref, cs, time.Time{})
}

func (s *shadowForge) CommentsSince(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Comment, error) {
	cs, err := s.Forge.CommentsSince(ctx, ref, since)
	if err != nil || !s.on(ref.Repo) {
		return cs, err
	}
	return s.overlay(ctx, ref, cs, since)
}

// overlay adds the comments posted in shadow to cs (the comments, and on a merge request the
// reviews' summaries and the replies) and applies the edits, keeping the comments created or
// edited at or after since, oldest first.
func (s *shadowForge) overlay(ctx context.Context, ref forge.IssueRef, cs []forge.Comment, since time.Time) ([]forge.Comment, error) {
	ws, err := s.cfg.Log.ShadowWrites(ctx, s.target(ref))
	if err != nil {
		return nil, err
	}
	out := slices.Clone(cs)
	at := map[int64]int{} // comment id → index in out
	for i, c := range out {
		at[c.ID] = i
	}
	for _, w := range ws {
		switch w.Kind {
		case ShadowComment, ShadowReview, ShadowReply:
			// A review's summary and a reply show in the merge request's conversation too, as
			// the bot's comments with their markers: what they said is found there (postedKeys),
			// so a pass acting on the same outcome again records neither twice.
			at[-w.ID] = len(out)
			out = append(out, forge.Comment{ID: -w.ID, Body: w.Body, Author: forge.User{Login: s.cfg.BotLogin},
				CreatedAt: w.At, UpdatedAt: w.At})
		case ShadowEditComment:
			if i, ok := at[w.CommentID]; ok {
				out[i].Body, out[i].UpdatedAt = w.Body, w.At
			}
		}
	}
	out = slices.DeleteFunc(out, func(c forge.Comment) bool {
		return !since.IsZero() && c.CreatedAt.Before(since) && c.UpdatedAt.Before(since)
	})
	slices.SortStableFunc(out, func(a, b forge.Comment) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

type shadowReviews struct {
	forge.Reviews
	s *shadowForge
}

func mrRef(repo string, number int64) forge.IssueRef {
	return forge.IssueRef{Repo: repo, Number: number, MergeRequest: true}
}

func (r *shadowReviews) Reply(ctx context.Context, repo string, number int64, to forge.ReviewComment, body string) (int64, error) {
	if !r.s.on(repo) {
		return r.Reviews.Reply(ctx, repo, number, to, body)
	}
	id, err := r.s.record(ctx, ShadowWrite{Target: mrRef(repo, number), Kind: ShadowReply, Body: body,
		Detail: map[string]string{"thread": to.Thread, "in_reply_to": strconv.FormatInt(to.ID, 10)}})
	return -id, err
}

func (r *shadowReviews) ResolveThread(ctx context.Context, repo string, number int64, thread string) error {
	if !r.s.on(repo) {
		return r.Reviews.ResolveThread(ctx, repo, number, thread)
	}
	_, err := r.s.record(ctx, ShadowWrite{Target: mrRef(repo, number), Kind: ShadowResolve,
		Detail: map[string]string{"thread": thread}})
	return err
}

func (r *shadowReviews) PostReview(ctx context.Context, repo string, number int64, rv forge.NewReview) (int64, error) {
	if !r.s.on(repo) {
		return r.Reviews.PostReview(ctx, repo, number, rv)
	}
	detail := map[string]string{"event": string(cmp.Or(rv.Event, forge.ReviewCommentOnly)), "head_sha": rv.HeadSHA}
	var inline []string
	for _, c := range rv.Comments {
		inline = append(inline, c.Position.Key()+": "+c.Body)
	}
	if len(inline) > 0 {
		detail["comments"] = strings.Join(inline, "\n\n")
	}
	id, err := r.s.record(ctx, ShadowWrite{Target: mrRef(repo, number), Kind: ShadowReview, Body: rv.Body, Detail: detail})
	return -id, err
}

type shadowMerger struct {
	forge.Merger
	s *shadowForge
}

func (m *shadowMerger) Merge(ctx context.Context, repo string, number int64, opt forge.MergeOptions) error {
	if !m.s.on(repo) {
		return m.Merger.Merge(ctx, repo, number, opt)
	}
	_, err := m.s.record(ctx, ShadowWrite{Target: mrRef(repo, number), Kind: ShadowMerge,
		Detail: map[string]string{"method": string(cmp.Or(opt.Method, forge.MergeCommit)), "head_sha": opt.HeadSHA}})
	return err
}

// shadowPark holds the run of mb's state when the project is in shadow mode and the run's phase
// pushes (development, ci_fix, review_fix, conflict_resolution): a run that is never pushed has
// nothing to show the pages but a diff, and everything after it (CI, review, merge) happens on
// the forge. The hold is recorded once per state as a ShadowRun write. It reports whether the
// run is held; once the project is live the run starts at the mailbox's next pass.
func (m *Machine) shadowPark(ctx context.Context, mb *Mailbox) (bool, error) {
	p := def(mb.State).Phase
	if p == "" || p.ReadOnly() || !m.settings(mb.Repo).Shadow {
		mb.Data.ShadowParked = ""
		return false, nil
	}
	d := def(mb.State)
	r, err := m.store.UnappliedRun(ctx, mb.ID, string(d.Phase), string(d.Step))
	if err != nil {
		return false, err
	}
	if r != nil && r.HeadSHA == "" && (r.Attempt <= 1 || mb.MRNumber != 0) {
		// The run already ran (started live, collected after the switch to shadow, so without
		// its push): having pushed nothing, its stored outcome blocks the issue (applyPush), a
		// write recorded in shadow, instead of being held until live. An outcome that would
		// open a merge request (a push, or a later attempt's branch) waits for live: shadow
		// opens none.
		return false, nil
	}
	if mb.Data.ShadowParked == string(mb.State) {
		return true, nil
	}
	if m.cfg.ShadowLog != nil {
		body := fmt.Sprintf("The %s run would start now. Shadow mode starts no run that pushes: it starts when the project is live.",
			def(mb.State).runKey())
		if _, err := m.cfg.ShadowLog.RecordShadow(ctx, ShadowWrite{Target: mb.Ref(), Kind: ShadowRun, Body: body,
			Detail: map[string]string{"phase": string(p), "state": string(mb.State)}}); err != nil {
			return false, fmt.Errorf("record the shadow run: %w", err)
		}
	}
	m.log.Info("shadow mode: run held", "mailbox_id", mb.ID, "phase", p)
	mb.Data.ShadowParked = string(mb.State)
	return true, nil
}
