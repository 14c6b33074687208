package mailbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Rebuilds is what rebuilding mailboxes from the forge needs of the store (spec/reliability.md,
// "Rebuild from the forge").
type Rebuilds interface {
	// Empty reports whether nothing was ever worked on in the store: no mailbox past idle, no
	// event applied and no comment recorded (a new database, or one that was lost; a rebuilt
	// mailbox records its comments). Idle mailboxes holding only
	// deliveries that wait are empty still: a start-up rebuild that waited for the forge while
	// deliveries came, then stopped (a restart), is done again at the next start.
	Empty(ctx context.Context) (bool, error)
	// Rebuild stores r's mailbox with its comments and questions in one transaction, unless the
	// issue already has a mailbox that is not idle (then it stores nothing and reports false).
	// An idle mailbox of the issue (made by a delivery stored while the rebuild ran: store
	// first) is taken over with its id and its pending events, applied after the rebuild, when r's
	// mailbox is not idle itself (an idle rebuild adds nothing to it, so a second rebuild stores
	// nothing). It sets the
	// mailbox id in r.Mailbox, in the comments and in the questions. The mailbox's Reconciled
	// times are stored as given (nil: never), its lease is free.
	Rebuild(ctx context.Context, r *Rebuilt) (created bool, err error)
}

// Rebuilt is a mailbox derived from what Alfred left on the forge (DeriveMailbox): the row,
// the comments it posted (so that none is posted again) and the open question block.
type Rebuilt struct {
	// Mailbox is the row to store; its ID is set by Rebuilds.Rebuild.
	Mailbox Mailbox
	// Comments are the bot's marked comments, one per key, with the hash of the body the bot
	// would post again (the question block as rendered, not as ticked by a human since).
	Comments []PostedComment
	// Questions are the questions of the open question block, unanswered.
	Questions []Question
	// Untrusted are the status and type labels on the issue that were not taken: the forge's
	// label history shows neither Alfred nor an account with the role gate.StateLabel needs
	// adding them (trustedLabels).
	Untrusted []string
}

// RebuildStats is what one rebuild did on one forge.
type RebuildStats struct {
	// Forge is the configured forge name.
	Forge string
	// Issues counts the open issues assigned to the bot that were looked at; Rebuilt the
	// mailboxes stored; Existing the issues that had a mailbox already (left as they are);
	// Skipped those that carry no status label of Alfred's (a new assignment:
	// reconciliation starts them) or are in a repository not this Alfred's.
	Issues, Rebuilt, Existing, Skipped int
	// States counts the rebuilt mailboxes per state.
	States map[State]int
	// Err is the first error, nil when the rebuild completed.
	Err error
}

// Rebuild rebuilds, on every configured forge, the mailbox of each open issue assigned to the
// bot, in a repository of this Alfred's (as reconciliation decides), that has no mailbox in the
// store, from what Alfred left on the forge (DeriveMailbox). It is idempotent: an issue with a
// mailbox is left as it is. cfg is the machine's configuration (labels, CI wait, branch
// prefix). The rebuilt mailboxes are due at once, never reconciled: the next reconciliation
// pass turns what changed on the forge meanwhile (answers, the plan validation, a merge) into
// events.
func (r *Reconciler) Rebuild(ctx context.Context, store Rebuilds, cfg Config) ([]RebuildStats, error) {
	cfg = cfg.withDefaults()
	names := make([]string, 0, len(r.bots))
	for name := range r.bots {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []RebuildStats
	var first error
	for _, name := range names {
		st := r.rebuildForge(ctx, store, cfg, name)
		level := slog.LevelInfo
		if st.Err != nil {
			level = slog.LevelWarn
			first = keepRebuildErr(first, st.Err)
		}
		r.log.Log(ctx, level, "rebuilt mailboxes from the forge", "forge", name, "issues", st.Issues, "rebuilt", st.Rebuilt,
			"existing", st.Existing, "skipped", st.Skipped, "states", st.States, "err", st.Err)
		out = append(out, st)
	}
	return out, first
}

// keepRebuildErr is the error a rebuild reports of have (kept so far) and err: the first, unless
// a later one is the forge's unavailability (forge.ErrUnavailable) and the first is not, since
// that is the error a caller waits on (the start-up rebuild tries again while a forge is
// unavailable); a 404 on one issue before an outage must not end the wait.
func keepRebuildErr(have, err error) error {
	if have == nil || (errors.Is(err, forge.ErrUnavailable) && !errors.Is(have, forge.ErrUnavailable)) {
		return err
	}
	return have
}

// RebuildIfEmpty runs Rebuild when the store holds no mailbox at all, and says so in the log;
// it returns Rebuild's stats, nil when the store was not empty.
func (r *Reconciler) RebuildIfEmpty(ctx context.Context, store Rebuilds, cfg Config) ([]RebuildStats, error) {
	empty, err := store.Empty(ctx)
	if err != nil || !empty {
		return nil, err
	}
	r.log.Info("the store is empty: rebuilding the mailboxes of the open issues assigned to the bot from the forge")
	return r.Rebuild(ctx, store, cfg)
}

func (r *Reconciler) rebuildForge(ctx context.Context, store Rebuilds, cfg Config, name string) RebuildStats {
	st := RebuildStats{Forge: name, States: map[State]int{}}
	bot := r.bots[name]
	known, err := r.store.KnownRepos(ctx, name)
	if err != nil {
		st.Err = err
		return st
	}
	issues, err := bot.Forge.AssignedIssues(ctx, time.Time{}, 0)
	if err != nil {
		st.Err = fmt.Errorf("rebuild %s: list the bot's assigned issues: %w", name, err)
		return st
	}
	var pass PassStats
	for i := range issues {
		is := issues[i]
		is.Ref.Forge = name
		st.Issues++
		ok, err := r.oursAs(ctx, name, bot, known, is.Ref.Repo, &pass, false)
		if err != nil {
			st.Err = keepRebuildErr(st.Err, err)
			continue
		}
		if !ok {
			st.Skipped++
			continue
		}
		if tracked, err := r.store.Tracked(ctx, is.Ref); err != nil {
			st.Err = keepRebuildErr(st.Err, err)
			continue
		} else if tracked {
			st.Existing++ // a working mailbox: its comments are not even read
			continue
		}
		rb, err := DeriveMailbox(ctx, bot, cfg, &is, r.now())
		if err != nil {
			r.log.Warn("rebuilding a mailbox from the forge failed; run the rebuild again", "issue", is.Ref.String(), "err", err)
			st.Err = keepRebuildErr(st.Err, err)
			continue
		}
		if rb == nil {
			st.Skipped++
			continue
		}
		created, err := store.Rebuild(ctx, rb)
		if err != nil {
			st.Err = keepRebuildErr(st.Err, fmt.Errorf("rebuild %s: %w", is.Ref, err))
			continue
		}
		if !created {
			st.Existing++
			continue
		}
		st.Rebuilt++
		st.States[rb.Mailbox.State]++
		if len(rb.Untrusted) > 0 {
			r.log.Warn("labels not taken as state: no writer or Alfred added them", "issue", is.Ref.String(), "labels", rb.Untrusted)
		}
		if why, ok := strings.CutPrefix(rb.Mailbox.Data.Blocked, "rebuilt from the forge: "); ok {
			r.log.Warn("a mailbox rebuilt from the forge is blocked until a human says retry", "issue", is.Ref.String(), "reason", why)
		}
		r.log.Info("rebuilt a mailbox from the forge", "issue", is.Ref.String(), "mailbox_id", rb.Mailbox.ID,
			"state", rb.Mailbox.State, "comments", len(rb.Comments), "questions", len(rb.Questions))
	}
	return st
}

// ownComment is one of the bot's marked comments on the issue.
type ownComment struct {
	key, kind string
	c         forge.Comment
	text      string // the body after the marker line
}

// DeriveMailbox derives the mailbox of an open issue assigned to the bot from what Alfred left
// on it: the status label gives the state (status::waiting_info with a type question open:
// waiting_type; status::in_development with a merge request: in_ci, whose CI poll finds a
// failure again); the marked comments give the comment keys, the round, the open question
// block, the plan, the validation and the merge request (read for its branch and head); the
// functional analysis section gives the decisions. It returns nil when the issue carries
// neither a status label nor a marked comment of the bot (a new assignment, which
// reconciliation starts). b is the bot (its forge, its login, the other bots whose labels
// count for nobody), cfg the machine's configuration, now the clock of the deadlines it sets.
//
// What it cannot know is named in spec/reliability.md: run history, costs, the agent session,
// the parts of the functional analysis result not in the question block, the review comments
// already handled (all present are taken as handled).
func DeriveMailbox(ctx context.Context, b Bot, cfg Config, is *forge.Issue, now time.Time) (*Rebuilt, error) {
	f, bot := b.Forge, b.Login
	cfg = cfg.withDefaults()
	ref := is.Ref
	// The labels' trust and the author's assignment read one history (hist has only the
	// forge.Forge calls: f keeps the others, forge.Reviews).
	hist := &historyOnce{Forge: f}
	cs, err := f.Comments(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: read comments: %w", ref, err)
	}
	own := map[string]ownComment{}
	var latest time.Time
	for _, c := range cs {
		if !strings.EqualFold(c.Author.Login, bot) {
			continue
		}
		key, kind, ok := ParseMarker(c.Body)
		if !ok {
			continue
		}
		text := c.Body
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		} else {
			text = ""
		}
		own[key] = ownComment{key: key, kind: kind, c: c, text: text}
		if c.CreatedAt.After(latest) {
			latest = c.CreatedAt
		}
	}
	labels, untrusted, err := trustedLabels(ctx, hist, b, cfg, is)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: %w", ref, err)
	}
	state := stateOfLabels(cfg.Labels, labels)
	if state == "" && len(own) == 0 {
		return nil, nil
	}
	mb := Mailbox{Forge: ref.Forge, Repo: ref.Repo, Number: ref.Number, Author: is.Author.Login, Title: is.Title,
		Labels: labels, Assignees: slices.Clone(is.Assignees), CreatedAt: now}
	for _, l := range labels {
		if t := cfg.Labels.TypeOf(l); t != "" {
			mb.Type = t
			break
		}
	}
	d := &mb.Data
	d.Round = maxSuffix(own, "ack-", "questions-", "plan-", "validated-", "mr-", "analysis-", "answer-", "defaults-")
	d.Blocks = countPrefix(own, "blocked-")
	d.StuckReports = maxSuffix(own, "stuck-")
	d.CIAttempts = ciAttempts(own)
	d.ReviewAttempts = maxSuffix(own, "review-fix-")
	if fa, ok := Section(is.Body, sectionFunctional); ok {
		d.Decisions = parseDecisions(fa)
	}
	if p, ok := own[fmt.Sprintf("plan-%d", d.Round)]; ok {
		d.Plan = parsePlan(p.text)
	}
	if v, ok := own[fmt.Sprintf("validated-%d", d.Round)]; ok {
		d.ValidatedBy = parseValidatedBy(v.text)
	}
	rb := &Rebuilt{Untrusted: untrusted}
	hashes := map[string]string{}
	// unreadable is why the open question block could not be read back: the mailbox is rebuilt
	// blocked, so nothing is posted or asked until a human says retry (which runs the
	// functional analysis again), rather than started again as a new assignment.
	unreadable := ""
	if state == StateWaitingInfo {
		block, ok := own[fmt.Sprintf("questions-%d", d.Round)]
		pb, err := parseBlock(block.text)
		_, analysed := Section(is.Body, sectionFunctional)
		switch {
		case !ok:
			unreadable = fmt.Sprintf("the status says questions are open, but the question block questions-%d is not there", d.Round)
		case err != nil:
			unreadable = "the question block could not be read back: " + err.Error()
		case !pb.open && analysed:
			// Answered, the analysis written, the label not moved yet: the next step is due.
			state = StateTechnicalAnalysis
			if mb.Type == "analysis" {
				state = StateInReview
			}
		case !pb.open:
			unreadable = "the question block is answered, but the functional analysis is not in the description"
		}
		if unreadable == "" && pb.open {
			d.QuestionIntro = pb.intro
			if d.AuthorAssignedByHuman, err = authorAssignedByHuman(ctx, hist, bot, ref, is.Author.Login, is.Assignees); err != nil {
				return nil, fmt.Errorf("rebuild %s: %w", ref, err)
			}
			asksType := len(pb.questions) == 1 && pb.questions[0].Title == TypeQuestion().Title
			if asksType {
				state = StateWaitingType
				mb.Type = ""
				mb.Labels = slices.DeleteFunc(mb.Labels, func(l string) bool { return cfg.Labels.TypeOf(l) != "" })
			} else {
				d.AnalysisRound = d.Round
				d.Analysis = &phase.Result{Understanding: pb.understanding(), Questions: pb.questions}
			}
			for _, q := range pb.questions {
				opts, _ := json.Marshal(q.Options)
				rb.Questions = append(rb.Questions, Question{Round: d.Round, QID: q.ID, Title: q.Title, Context: q.Context,
					OptionsJSON: string(opts), Default: q.Default, DeadlineAt: pb.deadline})
			}
			// Ticks a human added since: the hash is the block as the bot rendered it, so
			// reconciliation reads the forge's block as the human's edit and applies them. A
			// block whose ticks are the defaults keeps its own hash (what the bot posted passed
			// the censor, which may differ from a plain rendering): no edit to apply.
			if len(ParseTicks(block.text, pb.questions)) > 0 {
				hashes[block.key] = bodyHash(Marker(block.key, block.kind) + "\n" + RenderQuestions(pb.intro, pb.questions, pb.deadline))
			}
		}
	}
	for _, o := range own {
		if eventKeyed(o.key) {
			continue // keyed by an event id of the lost store: the new store's ids start again
		}
		h, ok := hashes[o.key]
		if !ok {
			h = bodyHash(o.c.Body)
		}
		rb.Comments = append(rb.Comments, PostedComment{Key: o.key, Kind: o.kind, CommentID: o.c.ID, BodyHash: h})
	}
	slices.SortFunc(rb.Comments, func(a, b PostedComment) int { return cmp.Compare(a.CommentID, b.CommentID) })
	// lostMR says why the merge request of a state that has one is not known: its comment is
	// gone, or it names a merge request that is not Alfred's.
	var lostMR string
	if m, ok := own[fmt.Sprintf("mr-%d", d.Round)]; ok {
		if n, branch := parseMRComment(m.text); n != 0 {
			mb.MRNumber, mb.Branch = n, branch
			mr, err := f.MergeRequest(ctx, ref.Repo, n)
			switch {
			case err == nil && (mr.FromFork || (branch != "" && mr.SourceBranch != branch)):
				// Someone else's: an issue moved to another project keeps the comment, whose
				// number names a merge request of the old one.
				lostMR = fmt.Sprintf("merge request !%d is from %s, not from my branch %s", n, mr.SourceBranch, branch)
				mb.MRNumber = 0
			case err == nil:
				mb.HeadSHA, mb.Branch = mr.HeadSHA, cmp.Or(mr.SourceBranch, branch)
				if err := handledReviews(ctx, f, ref.Repo, n, d); err != nil {
					return nil, fmt.Errorf("rebuild %s: %w", ref, err)
				}
			case !errors.Is(err, forge.ErrNotFound):
				return nil, fmt.Errorf("rebuild %s: read merge request %d: %w", ref, n, err)
			}
		}
	}
	if lostMR == "" && mb.MRNumber == 0 && (state == StateInCI || state == StateInReview) {
		lostMR = "no comment of mine names the merge request"
	}
	switch {
	case lostMR != "" && (state == StateInDevelopment || state == StateInCI || state == StateInReview):
		// Never another's merge request, nor a CI read of no head: a human decides (a retry
		// runs the development again).
		state = StateBlocked
		d.Blocked, d.BlockedFrom = "rebuilt from the forge: "+lostMR, StateInDevelopment
	case state == "" && !onlyAcknowledged(own):
		// No status label, but comments past the acknowledgement (questions, a plan, a merge
		// request): a person removed the label. Not started again (a second acknowledgement,
		// the analyses run again): a human decides, and a retry resumes where the comments show.
		state = StateBlocked
		d.Blocked = "rebuilt from the forge: the issue has no status label (removed by hand?)"
		d.BlockedFrom = blockedFrom(mb, d, own)
	case state == "":
		// Marked comments but no status label: the pass that acknowledged stopped before the
		// label. Idle, without the bot among the assignees and a round back, so reconciliation's
		// assignment starts it again and the acknowledgement is edited, not posted twice.
		state = StateIdle
		d.Round = max(d.Round-1, 0)
		mb.Assignees = slices.DeleteFunc(mb.Assignees, func(a string) bool { return strings.EqualFold(a, bot) })
	case state == StateInDevelopment && mb.MRNumber != 0:
		state = StateInCI // a ci_fix, review_fix or conflict run was due; the CI poll finds out again
	case state == StateInDevelopment && mb.Type == "question":
		state = StateAnswering
	case unreadable != "":
		state = StateBlocked
		d.Blocked, d.BlockedFrom = "rebuilt from the forge: "+unreadable, StateFunctionalAnalysis
	case state == StateBlocked:
		d.Blocked = "rebuilt from the forge while blocked"
		d.BlockedFrom = blockedFrom(mb, d, own)
	}
	mb.State = state
	d.Acknowledged = state != StateIdle
	if state == StateInCI {
		d.CIWaitUntil = now.Add(cfg.CIWait)
	}
	// One-shot labels present now were added while Alfred could not see them: they stay out
	// of the mailbox's labels, so reconciliation finds them as added and acts on them.
	mb.Labels = slices.DeleteFunc(mb.Labels, func(l string) bool {
		return slices.ContainsFunc([]string{cfg.Labels.ValidatePlan, cfg.Labels.Retry, cfg.Labels.RetryOnce,
			cfg.Labels.RetryUntilGreen}, func(o string) bool { return strings.EqualFold(o, l) })
	})
	if state.Closed() && is.State == "open" {
		// Reopened and the bot assigned again while Alfred had no store (at the end Alfred
		// unassigns itself): the assignment is new to the rebuilt mailbox, so that
		// reconciliation starts the issue again as the live bot would.
		mb.Assignees = slices.DeleteFunc(mb.Assignees, func(a string) bool { return strings.EqualFold(a, bot) })
	}
	if state.Closed() {
		mb.ClosedAt = &now
	} else {
		mb.WakeAt = &now
	}
	// Comments are read again from the bot's last comment: what humans wrote after it (answers,
	// retry) was not applied.
	since := cmp.Or(latest, now)
	mb.CommentsSince = &since
	rb.Mailbox = mb
	return rb, nil
}

// onlyAcknowledged reports whether Alfred's marked comments are acknowledgements only (and
// comments keyed by an event id): a pass that acknowledged and stopped before its label.
func onlyAcknowledged(own map[string]ownComment) bool {
	for k := range own {
		if !strings.HasPrefix(k, "ack-") && !eventKeyed(k) {
			return false
		}
	}
	return true
}

// stateOfLabels returns the state a status label names ("" when the issue has none): the
// first state of the table with that label.
func stateOfLabels(l Labels, labels []string) State {
	// Blocked first: besides another status label it is a writer's hold (Forgejo and GitLab
	// Free keep the old label when a person adds one; Alfred's own changes replace it), and a
	// hold is never lost.
	for _, s := range []State{StateBlocked, StateWaitingInfo, StateFunctionalAnalysis, StateTechnicalAnalysis, StateWaitingValidation,
		StateInDevelopment, StateInCI, StateInReview, StateDone} {
		if st := l.Status(s); st != "" && containsFold(labels, st) {
			return s
		}
	}
	return ""
}

// eventKeyed reports the comment keys made of an event id (see their post calls): a rebuilt
// mailbox does not record them, so that an event of the new store with the same id posts its
// own comment instead of editing an old one.
func eventKeyed(key string) bool {
	for _, p := range []string{"auto-merge-on-", "held-", "refused-", "retry-", "set-aside-"} {
		if rest, ok := strings.CutPrefix(key, p); ok {
			if _, err := strconv.ParseInt(rest, 10, 64); err == nil {
				return true
			}
		}
	}
	return false
}

var blockedKeyRE = regexp.MustCompile(`^blocked-\d+-([a-z_]+)-b\d+$`)

// blockedFrom returns the state a rebuilt blocked mailbox resumes on retry: the one the newest
// block comment's key names ("blocked-ROUND-STATE-bN"). When the newest is a hold by a human's
// label ("held-…"), it is guessed from what the forge shows: the merge request (in CI), a
// validated plan (development), a plan (validation), the functional analysis (technical
// analysis), else the functional analysis.
func blockedFrom(mb Mailbox, d *Data, own map[string]ownComment) State {
	var newest *ownComment
	for k, o := range own {
		if blockedKeyRE.MatchString(k) || strings.HasPrefix(k, "held-") {
			if newest == nil || o.c.CreatedAt.After(newest.c.CreatedAt) ||
				(o.c.CreatedAt.Equal(newest.c.CreatedAt) && o.c.ID > newest.c.ID) {
				newest = &o
			}
		}
	}
	if newest != nil {
		if m := blockedKeyRE.FindStringSubmatch(newest.key); m != nil && State(m[1]).Working() {
			return State(m[1])
		}
	}
	switch {
	case mb.MRNumber != 0:
		return StateInCI
	case d.Plan != "" && d.ValidatedBy != "":
		return StateInDevelopment
	case d.Plan != "":
		return StateWaitingValidation
	case d.Decisions != nil:
		return StateTechnicalAnalysis
	}
	return StateFunctionalAnalysis
}

// handledReviews records the merge request's review comments present now as handled: the
// review_fix runs before the rebuild took them, and no run takes a comment twice.
func handledReviews(ctx context.Context, f forge.Forge, repo string, number int64, d *Data) error {
	rv, ok := f.(forge.Reviews)
	if !ok {
		return nil
	}
	cs, err := rv.ReviewComments(ctx, repo, number)
	if err != nil {
		return fmt.Errorf("read the review comments of %d: %w", number, err)
	}
	for _, c := range cs {
		d.Handled = append(d.Handled, c.ID)
	}
	return nil
}

// bodyHash is the hex SHA-256 of a comment's body, as PostedComment.BodyHash holds it.
func bodyHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// maxSuffix returns the highest number that ends a key starting with one of prefixes, the
// whole rest being a number ("questions-3"); 0 when none.
func maxSuffix(own map[string]ownComment, prefixes ...string) int {
	n := 0
	for k := range own {
		for _, p := range prefixes {
			if rest, ok := strings.CutPrefix(k, p); ok {
				if v, err := strconv.Atoi(rest); err == nil && v > n {
					n = v
				}
			}
		}
	}
	return n
}

// ciAttempts counts the ci_fix comments ("cifix-<sha>") posted since the last retry that gave
// the CI fixes fresh attempts: a "Retrying as asked by" retry (a retry comment or ai::retry,
// not ai::retry_once) of a block from ci_fix. Resume resets the count then and runs the fix
// the block stopped without counting it (a failure counts when CI is read, checkCI), so the
// first fix after such a retry is not counted either.
func ciAttempts(own map[string]ownComment) int {
	list := slices.SortedFunc(maps.Values(own), func(a, b ownComment) int { return cmp.Compare(a.c.ID, b.c.ID) })
	n := 0
	var blockedFrom string
	for _, o := range list {
		switch {
		case strings.HasPrefix(o.key, "cifix-"):
			n++
		case blockedKeyRE.MatchString(o.key):
			blockedFrom = blockedKeyRE.FindStringSubmatch(o.key)[1]
		case strings.HasPrefix(o.key, "retry-") && strings.HasPrefix(strings.TrimSpace(o.text), "Retrying as asked by"):
			if blockedFrom == string(StateCIFix) {
				n = -1
			}
			blockedFrom = ""
		}
	}
	return max(n, 0)
}

func countPrefix(own map[string]ownComment, prefix string) int {
	n := 0
	for k := range own {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// parsePlan reads the plan out of the plan comment (see applyResult).
func parsePlan(text string) string {
	text = strings.TrimPrefix(strings.TrimSpace(text), "## Technical plan")
	if i := strings.LastIndex(text, "\n\nAdd the `"); i >= 0 {
		text = text[:i]
	}
	return strings.TrimSpace(text)
}

var validatedRE = regexp.MustCompile(`Plan validated by @([^\s.]+)`)

func parseValidatedBy(text string) string {
	if m := validatedRE.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

var mrCommentRE = regexp.MustCompile("I opened (?:merge|pull) request [!#](\\d+) from `([^`]+)`")

// parseMRComment reads the number and branch out of the "I opened merge request !N from
// `branch`" comment; 0 when it does not say.
func parseMRComment(text string) (int64, string) {
	m := mrCommentRE.FindStringSubmatch(text)
	if m == nil {
		return 0, ""
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n, m[2]
}

var decisionRE = regexp.MustCompile(`^\|\s*(q\d+)\.\s.*?\|\s*[a-z]\.\s(.*?)\s*\|[^|]*\|\s*$`)

// parseDecisions reads the decisions table of the functional analysis section (RenderAnalysis):
// question id → the chosen option's label; nil when there is none.
func parseDecisions(section string) map[string]string {
	var out map[string]string
	for _, line := range strings.Split(section, "\n") {
		if m := decisionRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			if out == nil {
				out = map[string]string{}
			}
			out[m[1]] = strings.ReplaceAll(m[2], `\|`, "|")
		}
	}
	if out == nil {
		return map[string]string{}
	}
	return out
}

// parsedBlock is a question block read back from its comment (renderBlock).
type parsedBlock struct {
	intro     string
	open      bool // still waiting for answers: its deadline is shown
	deadline  time.Time
	questions []phase.Question
}

const understandingIntro = "Here is how I understand the issue:\n\n"

// understanding returns the understanding quoted in the intro of an analysis round, "" when
// there is none.
func (p parsedBlock) understanding() string {
	rest, ok := strings.CutPrefix(p.intro, understandingIntro)
	if !ok {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		q, ok := strings.CutPrefix(l, "> ")
		if !ok {
			if l == ">" {
				lines = append(lines, "")
				continue
			}
			break
		}
		lines = append(lines, q)
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

var (
	openNoticeRE  = regexp.MustCompile(`^\*\*Without an answer by (\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?) UTC, I will apply the defaults\.\*\*$`)
	optionLineRE  = regexp.MustCompile(`^- \[([ xX])\] \*\*([a-z])\. (.*?)\*\*( _\(default\)_)?(?: — (.*))?$`)
	blockQuestion = regexp.MustCompile(`^### (q\d+)\. (.*)$`)
)

// parseBlock reads a question block (the comment's text after its marker line) back into its
// intro, its questions and, when it is still open, its deadline. An option's id is its label:
// the block shows only labels (the type question's ids are its labels).
func parseBlock(text string) (parsedBlock, error) {
	var p parsedBlock
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	notice := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "**") && (openNoticeRE.MatchString(l) || strings.HasPrefix(l, "**Answered by ") ||
			strings.HasPrefix(l, "**No answer by ")) {
			notice = i
			break
		}
	}
	if notice < 0 {
		return p, errors.New("no deadline or answer notice")
	}
	if m := openNoticeRE.FindStringSubmatch(lines[notice]); m != nil {
		layout := "2006-01-02 15:04"
		if len(m[1]) > len(layout) {
			layout += ":05" // a deadline within the minute (deadlineText)
		}
		t, err := time.Parse(layout, m[1])
		if err != nil {
			return p, fmt.Errorf("read the deadline: %w", err)
		}
		p.open, p.deadline = true, t.UTC()
	}
	head := strings.Join(lines[:notice], "\n")
	if i := strings.Index(head, "\n\nTick one box per question"); i >= 0 {
		head = head[:i]
	}
	p.intro = strings.TrimRight(head, "\n")
	var cur *phase.Question
	var ctxLines []string
	flush := func() {
		if cur != nil {
			cur.Context = strings.TrimSpace(strings.Join(ctxLines, "\n"))
			p.questions = append(p.questions, *cur)
		}
		cur, ctxLines = nil, nil
	}
	for _, l := range lines[notice+1:] {
		if m := blockQuestion.FindStringSubmatch(l); m != nil {
			flush()
			cur = &phase.Question{ID: m[1], Title: m[2]}
			continue
		}
		if cur == nil {
			continue
		}
		if m := optionLineRE.FindStringSubmatch(l); m != nil {
			o := phase.Option{ID: m[3], Label: m[3], Description: m[5]}
			if m[4] != "" {
				cur.Default = o.ID
			}
			cur.Options = append(cur.Options, o)
			continue
		}
		if len(cur.Options) == 0 {
			ctxLines = append(ctxLines, l)
		}
	}
	flush()
	if len(p.questions) == 0 {
		return p, errors.New("no question")
	}
	return p, nil
}

// historyOnce is a forge whose whole history of an issue (Activity since the zero time) is
// read once: a rebuild asks it for the labels' trust and for who assigned the author.
type historyOnce struct {
	forge.Forge
	ref  forge.IssueRef
	acts []forge.Activity
	read bool
}

// Activity implements forge.Forge, from the first read for the whole history of one issue.
func (h *historyOnce) Activity(ctx context.Context, ref forge.IssueRef, since time.Time) ([]forge.Activity, error) {
	if !since.IsZero() {
		return h.Forge.Activity(ctx, ref, since)
	}
	if h.read && h.ref == ref {
		return h.acts, nil
	}
	acts, err := h.Forge.Activity(ctx, ref, since)
	if err == nil {
		h.ref, h.acts, h.read = ref, acts, true
	}
	return acts, err
}

// authorAssignedByHuman tells whether the author of the issue ref is assigned by a human
// (Data.AuthorAssignedByHuman): among assignees, and the assignee history (Forge.Activity)
// does not show the bot as the last to assign them. An assignment the history does not show
// was made when the issue was created, by a human. Only an author among assignees costs a read
// of the history.
func authorAssignedByHuman(ctx context.Context, f forge.Forge, bot string, ref forge.IssueRef, author string, assignees []string) (bool, error) {
	if author == "" || strings.EqualFold(author, bot) || !containsFold(assignees, author) {
		return false, nil
	}
	acts, err := f.Activity(ctx, ref, time.Time{})
	if err != nil {
		return false, fmt.Errorf("read the assignee history: %w", err)
	}
	by := ""
	for _, a := range acts {
		if a.Kind == forge.ActivityAssigned && strings.EqualFold(a.Login, author) {
			by = a.Actor.Login
		}
	}
	return !strings.EqualFold(by, bot), nil
}

// trustedLabels returns the issue's labels without the status and type labels the rebuild must
// not trust, and those (untrusted): a status or type label counts only when the issue's label
// history (Forge.Activity: the Forgejo/Gitea timeline's label events, GitLab's
// resource_label_events) shows it last added by the bot or by an account with the role
// gate.StateLabel needs, never by another bot (otherBot), whatever its access; a label the
// history does not show was set when the issue was created, by its author, and counts as the
// author's.
func trustedLabels(ctx context.Context, f forge.Forge, b Bot, cfg Config, is *forge.Issue) (labels, untrusted []string, err error) {
	bot := b.Login
	var check []string
	for _, l := range is.Labels {
		if containsFold(cfg.Labels.statuses(), l) || cfg.Labels.TypeOf(l) != "" {
			check = append(check, l)
		}
	}
	if len(check) == 0 {
		return slices.Clone(is.Labels), nil, nil
	}
	acts, err := f.Activity(ctx, is.Ref, time.Time{})
	if err != nil {
		return nil, nil, fmt.Errorf("read the label history: %w", err)
	}
	by := map[string]string{}
	botAdded := map[string]bool{} // labels another bot added last: nobody's, whatever its access
	for _, a := range acts {
		if a.Kind == forge.ActivityLabelAdded {
			by[strings.ToLower(a.Label)] = a.Actor.Login
			botAdded[strings.ToLower(a.Label)] = otherBot(f.Kind(), a.Actor, b)
		}
	}
	trust := map[string]bool{}
	for _, l := range is.Labels {
		if !slices.Contains(check, l) {
			labels = append(labels, l)
			continue
		}
		who, ok := by[strings.ToLower(l)]
		if !ok {
			who = is.Author.Login
		}
		if botAdded[strings.ToLower(l)] {
			untrusted = append(untrusted, l)
			continue
		}
		trusted, seen := trust[strings.ToLower(who)]
		if !seen {
			switch {
			case strings.EqualFold(who, bot):
				trusted = true
			case who != "":
				r, err := f.Role(ctx, is.Ref.Repo, who)
				if err != nil {
					return nil, nil, fmt.Errorf("check permission of %s: %w", who, err)
				}
				trusted = r >= cfg.Needs.Need(gate.StateLabel)
			}
			trust[strings.ToLower(who)] = trusted
		}
		if trusted {
			labels = append(labels, l)
		} else {
			untrusted = append(untrusted, l)
		}
	}
	return labels, untrusted, nil
}
