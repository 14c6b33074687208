package mailbox

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// effects counts what applying events did outside the mailbox in memory: every forge call
// (reads included: their answer is an input a replay might not see again), every store write
// and every call to the job runner. An event whose handling leaves the count unchanged changed
// nothing but the mailbox value, so its processed mark can wait and be committed with the
// following events' (applyEventsHeld); reapplying it from the stored mailbox gives the same
// result.
type effects struct{ n atomic.Int64 }

func (fx *effects) add()         { fx.n.Add(1) }
func (fx *effects) count() int64 { return fx.n.Load() }

// watched returns a copy of m whose store and job runner count their effects in fx; the copy
// shares m's configuration, clock, log and what it knows (permissions, labels).
func (m *Machine) watched(fx *effects) *Machine {
	w := *m
	w.store = effectStore{Store: m.store, fx: fx}
	if m.jobs != nil {
		if rec, ok := m.jobs.(RunRecoverer); ok {
			w.jobs = effectRecoverer{effectJobs{jobs: m.jobs, fx: fx}, rec}
		} else {
			w.jobs = effectJobs{jobs: m.jobs, fx: fx}
		}
	}
	return &w
}

// bot returns b with its forge counting every call in fx (the review and merge calls too when
// the forge has them).
func (fx *effects) bot(b Bot) Bot {
	if b.Forge == nil {
		return b
	}
	var rv forge.Reviews
	if r, ok := b.Forge.(forge.Reviews); ok {
		rv = effectReviews{rv: r, fx: fx}
	}
	var mg forge.Merger
	if g, ok := b.Forge.(forge.Merger); ok {
		mg = effectMerger{mg: g, fx: fx}
	}
	b.Forge = withOptional(effectForge{f: b.Forge, fx: fx}, rv, mg)
	return b
}

// effectStore is a Store counting its writes; reads pass through uncounted.
type effectStore struct {
	Store
	fx *effects
}

func (s effectStore) Deliver(ctx context.Context, ev forge.Event) (bool, error) {
	s.fx.add()
	return s.Store.Deliver(ctx, ev)
}

func (s effectStore) MarkProcessed(ctx context.Context, eventID int64, outcome string) error {
	s.fx.add()
	return s.Store.MarkProcessed(ctx, eventID, outcome)
}

func (s effectStore) Save(ctx context.Context, mb *Mailbox) error {
	s.fx.add()
	return s.Store.Save(ctx, mb)
}

func (s effectStore) SaveProcessed(ctx context.Context, mb *Mailbox, done []Processed) error {
	s.fx.add()
	return s.Store.SaveProcessed(ctx, mb, done)
}

func (s effectStore) SaveData(ctx context.Context, mb *Mailbox) error {
	s.fx.add()
	return s.Store.SaveData(ctx, mb)
}

func (s effectStore) Lease(ctx context.Context, owner string, ttl time.Duration) (*Mailbox, error) {
	s.fx.add()
	return s.Store.Lease(ctx, owner, ttl)
}

func (s effectStore) Claim(ctx context.Context, id int64, owner string, ttl time.Duration) (*Mailbox, error) {
	s.fx.add()
	return s.Store.Claim(ctx, id, owner, ttl)
}

func (s effectStore) Extend(ctx context.Context, id int64, owner string, ttl time.Duration) error {
	s.fx.add()
	return s.Store.Extend(ctx, id, owner, ttl)
}

func (s effectStore) Release(ctx context.Context, id int64, owner string, backoff time.Duration) error {
	s.fx.add()
	return s.Store.Release(ctx, id, owner, backoff)
}

func (s effectStore) InsertQuestions(ctx context.Context, qs []Question) error {
	s.fx.add()
	return s.Store.InsertQuestions(ctx, qs)
}

func (s effectStore) SetQuestionsDeadline(ctx context.Context, mailboxID int64, round int, at time.Time) error {
	s.fx.add()
	return s.Store.SetQuestionsDeadline(ctx, mailboxID, round, at)
}

func (s effectStore) AnswerQuestion(ctx context.Context, id int64, answer, by string, at time.Time) error {
	s.fx.add()
	return s.Store.AnswerQuestion(ctx, id, answer, by, at)
}

func (s effectStore) StartRun(ctx context.Context, r *Run) error {
	s.fx.add()
	return s.Store.StartRun(ctx, r)
}

func (s effectStore) FinishRun(ctx context.Context, r *Run) error {
	s.fx.add()
	return s.Store.FinishRun(ctx, r)
}

func (s effectStore) InterruptRuns(ctx context.Context, mailboxID int64) ([]Run, error) {
	s.fx.add()
	return s.Store.InterruptRuns(ctx, mailboxID)
}

func (s effectStore) FinishRecoveredRun(ctx context.Context, r *Run) (bool, error) {
	s.fx.add()
	return s.Store.FinishRecoveredRun(ctx, r)
}

func (s effectStore) SaveApplied(ctx context.Context, mb *Mailbox, runID int64) error {
	s.fx.add()
	return s.Store.SaveApplied(ctx, mb, runID)
}

func (s effectStore) DiscardUnapplied(ctx context.Context, mb *Mailbox, keepPhase, keepStep string) error {
	s.fx.add()
	return s.Store.DiscardUnapplied(ctx, mb, keepPhase, keepStep)
}

func (s effectStore) RecordComment(ctx context.Context, c PostedComment) error {
	s.fx.add()
	return s.Store.RecordComment(ctx, c)
}

func (s effectStore) ApplyComment(ctx context.Context, mailboxID, commentID, eventID int64) (bool, error) {
	s.fx.add()
	return s.Store.ApplyComment(ctx, mailboxID, commentID, eventID)
}

func (s effectStore) SaveReconciled(ctx context.Context, id int64, r Reconciled) error {
	s.fx.add()
	return s.Store.SaveReconciled(ctx, id, r)
}

func (s effectStore) FailEvents(ctx context.Context, eventIDs []int64, errText string, max int) (int, error) {
	s.fx.add()
	return s.Store.FailEvents(ctx, eventIDs, errText, max)
}

func (s effectStore) LeaseEvents(ctx context.Context, owner string, ttl time.Duration, runStates []string) (*Mailbox, error) {
	s.fx.add()
	return s.Store.LeaseEvents(ctx, owner, ttl, runStates)
}

func (s effectStore) LeaseRun(ctx context.Context, owner string, ttl time.Duration, runStates []string, perProject int) (*Mailbox, error) {
	s.fx.add()
	return s.Store.LeaseRun(ctx, owner, ttl, runStates, perProject)
}

// effectJobs is a JobRunner counting every call.
type effectJobs struct {
	jobs JobRunner
	fx   *effects
}

func (j effectJobs) Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error) {
	j.fx.add()
	return j.jobs.Execute(ctx, job)
}

func (j effectJobs) Cleanup(ctx context.Context, mailboxID int64) error {
	j.fx.add()
	return j.jobs.Cleanup(ctx, mailboxID)
}

func (j effectJobs) RemoveSessions(mailboxID int64) error {
	j.fx.add()
	return j.jobs.RemoveSessions(mailboxID)
}

// effectRecoverer is effectJobs of a runner that also recovers runs.
type effectRecoverer struct {
	effectJobs
	rec RunRecoverer
}

func (j effectRecoverer) Recover(ctx context.Context, job phase.Job, wait bool) (*phase.Outcome, error) {
	j.fx.add()
	return j.rec.Recover(ctx, job, wait)
}

// effectForge is a forge.Forge counting every call but Kind. It embeds nothing, so a method
// added to forge.Forge does not build until it is counted here.
type effectForge struct {
	f  forge.Forge
	fx *effects
}

func (f effectForge) Kind() forge.Kind { return f.f.Kind() }

func (f effectForge) BotUser(ctx context.Context) (forge.User, error) {
	f.fx.add()
	return f.f.BotUser(ctx)
}

func (f effectForge) Role(ctx context.Context, repo, login string) (forge.Role, error) {
	f.fx.add()
	return f.f.Role(ctx, repo, login)
}

func (f effectForge) Repository(ctx context.Context, repo string) (*forge.Repository, error) {
	f.fx.add()
	return f.f.Repository(ctx, repo)
}

func (f effectForge) Issue(ctx context.Context, ref forge.IssueRef) (*forge.Issue, error) {
	f.fx.add()
	return f.f.Issue(ctx, ref)
}

func (f effectForge) SetIssueBody(ctx context.Context, ref forge.IssueRef, body string) error {
	f.fx.add()
	return f.f.SetIssueBody(ctx, ref, body)
}

func (f effectForge) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	f.fx.add()
	return f.f.Comments(ctx, ref)
}

func (f effectForge) Comment(ctx context.Context, ref forge.IssueRef, body string) (int64, error) {
	f.fx.add()
	return f.f.Comment(ctx, ref, body)
}

func (f effectForge) EditComment(ctx context.Context, ref forge.IssueRef, id int64, body string) error {
	f.fx.add()
	return f.f.EditComment(ctx, ref, id, body)
}

func (f effectForge) SetLabels(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	f.fx.add()
	return f.f.SetLabels(ctx, ref, add, remove)
}

func (f effectForge) EnsureLabels(ctx context.Context, repo string, names []string) error {
	f.fx.add()
	return f.f.EnsureLabels(ctx, repo, names)
}

func (f effectForge) SetAssignees(ctx context.Context, ref forge.IssueRef, add, remove []string) error {
	f.fx.add()
	return f.f.SetAssignees(ctx, ref, add, remove)
}

func (f effectForge) CreateMergeRequest(ctx context.Context, repo string, mr forge.NewMergeRequest) (*forge.MergeRequest, error) {
	f.fx.add()
	return f.f.CreateMergeRequest(ctx, repo, mr)
}

func (f effectForge) MergeRequest(ctx context.Context, repo string, number int64) (*forge.MergeRequest, error) {
	f.fx.add()
	return f.f.MergeRequest(ctx, repo, number)
}

func (f effectForge) AssignedIssues(ctx context.Context, since time.Time, limit int) ([]forge.Issue, error) {
	f.fx.add()
	return f.f.AssignedIssues(ctx, since, limit)
}

func (f effectForge) CommentsSince(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Comment, error) {
	f.fx.add()
	return f.f.CommentsSince(ctx, ref, since)
}

func (f effectForge) Activity(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Activity, error) {
	f.fx.add()
	return f.f.Activity(ctx, ref, since)
}

func (f effectForge) Hooks(ctx context.Context, repo string) ([]forge.Hook, error) {
	f.fx.add()
	return f.f.Hooks(ctx, repo)
}

func (f effectForge) CIStatus(ctx context.Context, repo, sha string) (*forge.Pipeline, error) {
	f.fx.add()
	return f.f.CIStatus(ctx, repo, sha)
}

// effectReviews is forge.Reviews counting every call.
type effectReviews struct {
	rv forge.Reviews
	fx *effects
}

func (f effectReviews) ReviewComments(ctx context.Context, repo string, number int64) ([]forge.ReviewComment, error) {
	f.fx.add()
	return f.rv.ReviewComments(ctx, repo, number)
}

func (f effectReviews) Reply(ctx context.Context, repo string, number int64, to forge.ReviewComment, body string) (int64, error) {
	f.fx.add()
	return f.rv.Reply(ctx, repo, number, to, body)
}

func (f effectReviews) ResolveThread(ctx context.Context, repo string, number int64, thread string) error {
	f.fx.add()
	return f.rv.ResolveThread(ctx, repo, number, thread)
}

func (f effectReviews) PostReview(ctx context.Context, repo string, number int64, r forge.NewReview) (int64, error) {
	f.fx.add()
	return f.rv.PostReview(ctx, repo, number, r)
}

// effectMerger is forge.Merger counting every call.
type effectMerger struct {
	mg forge.Merger
	fx *effects
}

func (f effectMerger) MergeChecks(ctx context.Context, repo string, number int64) (*forge.MergeChecks, error) {
	f.fx.add()
	return f.mg.MergeChecks(ctx, repo, number)
}

func (f effectMerger) Merge(ctx context.Context, repo string, number int64, opt forge.MergeOptions) error {
	f.fx.add()
	return f.mg.Merge(ctx, repo, number, opt)
}

var (
	_ forge.Forge   = effectForge{}
	_ forge.Reviews = effectReviews{}
	_ forge.Merger  = effectMerger{}
	_ JobRunner     = effectJobs{}
	_ RunRecoverer  = effectRecoverer{}
)
