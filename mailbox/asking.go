package mailbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// start begins (or begins again) the lifecycle after the bot was assigned. derived tells an
// assignment the poll or the reconciliation derived from the forge: no delivery told the
// mailbox of the label changes before it either.
func (m *Machine) start(ctx context.Context, bot Bot, mb *Mailbox, sender string, eventID int64, derived bool) (string, error) {
	if mb.State.Working() {
		return "already working on it", nil
	}
	if d, err := m.authorize(ctx, bot, mb, gate.Assign, sender); err != nil {
		return "", err
	} else if d != gate.Allowed {
		// One refusal per person and issue: assigning me again and again is answered once.
		return m.refuseAs(ctx, bot, mb, "refused-assign-"+strings.ToLower(sender), sender, "assign me to an issue")
	}
	issue, err := bot.Forge.Issue(ctx, mb.Ref())
	if err != nil {
		return "", fmt.Errorf("read issue: %w", err)
	}
	m.ensureLabels(ctx, bot, mb)
	seen := slices.Clone(mb.Labels) // the labels the mailbox saw arrive, through the gate
	mb.Title, mb.Author, mb.Labels, mb.Assignees = issue.Title, issue.Author.Login, issue.Labels, issue.Assignees
	ignored := mb.Data.IgnoredLabels
	gen := mb.Data.Round + 1 // a restarted lifecycle asks its questions in new rounds
	// A new lifecycle: fresh data, but the counters in comment keys go on, so that a restarted
	// lifecycle posts new comments instead of editing the previous lifecycle's.
	mb.Data = Data{Round: gen, Blocks: mb.Data.Blocks, StuckReports: mb.Data.StuckReports, IgnoredLabels: ignored}
	mb.ClosedAt, mb.MRNumber, mb.HeadSHA = nil, 0, ""
	ack := fmt.Sprintf("Thanks @%s, I am on it. You can follow where I am in the `status::` label of this issue.",
		cmp.Or(mb.Author, sender))
	if err := m.post(ctx, bot, mb, fmt.Sprintf("ack-%d", gen), "ack", ack); err != nil {
		return "", err
	}
	mb.Data.Acknowledged = true
	// A type label the gate did not take (a non-writer added it before the assignment) leaves
	// the type question open (spec/authorization.md); so does, when the assignment was derived
	// (the poll, a missed delivery: the label changes before it were not delivered either), one
	// the mailbox never saw arrive that the label history does not show a writer, the author or
	// the bot adding. A delivered assignment's labels came through the deliveries before it.
	var acts []forge.Activity // the label history, read once at the first unseen type label
	read := false
	for _, l := range mb.Labels {
		t := m.cfg.Labels.TypeOf(l)
		if t == "" || containsFold(mb.Data.IgnoredLabels, l) {
			continue
		}
		if derived && !containsFold(seen, l) {
			if !read {
				var err error
				if acts, err = bot.Forge.Activity(ctx, mb.Ref(), time.Time{}); err != nil {
					return "", fmt.Errorf("read the label history: %w", err)
				}
				read = true
			}
			ok, err := m.unseenLabelAllowed(ctx, bot, mb, acts, l)
			if err != nil {
				return "", err
			}
			if !ok {
				mb.Data.IgnoredLabels = append(mb.Data.IgnoredLabels, l)
				continue
			}
		}
		mb.Type = t
		break
	}
	if mb.Type == "" {
		return "started: asked for the type", m.askType(ctx, bot, mb)
	}
	return "started", m.afterType(ctx, bot, mb)
}

// unseenLabelAllowed reports whether the gate allows the state label l that the issue carries
// and the mailbox never saw arrive, judged as the input of whoever the label history acts
// (Forge.Activity) shows last adding it (the issue's author when it shows nobody: the label was
// set when the issue was created); the bot's own label is allowed, another bot's never.
func (m *Machine) unseenLabelAllowed(ctx context.Context, bot Bot, mb *Mailbox, acts []forge.Activity, l string) (bool, error) {
	who := mb.Author
	if actor, ok := lastLabelChange(acts, forge.ActivityLabelAdded, l, time.Time{}, ""); ok {
		if otherBot(bot.Forge.Kind(), actor, bot) {
			return false, nil // another bot's label steers nothing, whatever its access
		}
		who = actor.Login
	}
	if strings.EqualFold(who, bot.Login) {
		return true, nil
	}
	d, _, err := m.decide(ctx, bot, mb, gate.StateLabel, who)
	return d == gate.Allowed, err
}

func (m *Machine) askType(ctx context.Context, bot Bot, mb *Mailbox) error {
	q := TypeQuestion()
	q.Context = fmt.Sprintf("I could not find a type label on the issue. You can also add `%s`, `%s`, `%s` or `%s` yourself.",
		m.cfg.Labels.TypeTask, m.cfg.Labels.TypeBug, m.cfg.Labels.TypeAnalysis, m.cfg.Labels.TypeQuestion)
	return m.ask(ctx, bot, mb, onNoType, "Before I start, tell me what kind of work this is.", []phase.Question{q})
}

// ask stores and posts a question block as a new round, hands the turn to the author and
// follows trigger on to the state that waits for the answers.
func (m *Machine) ask(ctx context.Context, bot Bot, mb *Mailbox, on trigger, intro string, qs []phase.Question) error {
	mb.Data.Round++
	mb.Data.resetTicks()
	round := mb.Data.Round
	wait := m.settings(mb.Repo).QuestionDeadline
	deadline := m.now().Add(wait)
	// Shown to the minute in the issue (to the second under a minute): round up, so that the
	// defaults never apply before the time the block announces.
	unit := time.Second
	if wait >= time.Minute {
		unit = time.Minute
	}
	if !deadline.Equal(deadline.Truncate(unit)) {
		deadline = deadline.Truncate(unit).Add(unit)
	}
	rows := make([]Question, 0, len(qs))
	for _, q := range qs {
		opts, _ := json.Marshal(q.Options)
		rows = append(rows, Question{MailboxID: mb.ID, Round: round, QID: q.ID, Title: q.Title,
			Context: q.Context, OptionsJSON: string(opts), Default: q.Default, DeadlineAt: deadline})
	}
	if err := m.store.InsertQuestions(ctx, rows); err != nil {
		return err
	}
	stored, err := m.store.Questions(ctx, mb.ID, round)
	if err != nil {
		return err
	}
	if len(stored) > 0 && !stored[0].DeadlineAt.Equal(deadline) {
		// A retried round whose block was posted keeps its first deadline; one whose post
		// failed (only its intent recorded) counts its time from the post that shows it, or
		// the author would be told of a deadline already past; a block the forge created
		// while answering an error is found and edited to the later deadline.
		posted, err := m.store.PostedComment(ctx, mb.ID, fmt.Sprintf("questions-%d", round))
		if err != nil {
			return err
		}
		if posted != nil && posted.CommentID != 0 {
			deadline = stored[0].DeadlineAt
		} else if err := m.store.SetQuestionsDeadline(ctx, mb.ID, round, deadline); err != nil {
			return err
		}
	}
	mb.Data.QuestionIntro = intro
	body := RenderQuestions(intro, qs, deadline)
	if err := m.post(ctx, bot, mb, fmt.Sprintf("questions-%d", round), "questions", body); err != nil {
		return err
	}
	// The turn is the author's: assigned, unless they are already. The answers hand back only
	// an assignment the bot made (handBack): one the assignee history shows by the bot (its
	// own, from a pass that failed after it, or from a lifecycle cancelled while questions
	// waited) is handed back, one by a human is left.
	mb.Data.AuthorAssignedByHuman = false
	if mb.Author != "" && !strings.EqualFold(mb.Author, bot.Login) {
		if containsFold(mb.Assignees, mb.Author) {
			byHuman, err := authorAssignedByHuman(ctx, bot.Forge, bot.Login, mb.Ref(), mb.Author, mb.Assignees)
			if err != nil {
				return err
			}
			mb.Data.AuthorAssignedByHuman = byHuman
		} else {
			if err := bot.Forge.SetAssignees(ctx, mb.Ref(), []string{mb.Author}, nil); err != nil {
				return fmt.Errorf("assign the author: %w", err)
			}
			mb.Assignees = append(mb.Assignees, mb.Author)
		}
	}
	return m.follow(ctx, bot, mb, on)
}

// afterType moves on once the type is known.
func (m *Machine) afterType(ctx context.Context, bot Bot, mb *Mailbox) error {
	if mb.Type == "question" {
		return m.follow(ctx, bot, mb, onQuestionType)
	}
	return m.follow(ctx, bot, mb, onWorkType)
}

// answer handles a reply, or ticks edited in the question block, by the author or a writer.
func (m *Machine) answer(ctx context.Context, bot Bot, mb *Mailbox, ev forge.Event, eventID int64) (string, error) {
	c, author := ev.Comment, ev.Sender.Login
	qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil {
		return "", err
	}
	if len(qs) == 0 {
		return "no open questions", nil
	}
	if ev.Type == forge.EventCommentEdited && ev.Action == derivedAction && c.ID != 0 &&
		slices.Contains(mb.Data.RefusedEdits, editOf(c)) {
		// The delivery of this very edit named who made it, and the gate refused them: the
		// reconciliation's attribution (to the comment's author) is not taken over it.
		return "ignored: an edit the gate refused when it was delivered", nil
	}
	if d, err := m.authorize(ctx, bot, mb, gate.Answer, author); err != nil {
		return "", err
	} else if d != gate.Allowed {
		if ev.Type == forge.EventCommentEdited && ev.Action != derivedAction && c.ID != 0 {
			mb.Data.RefusedEdits = append(mb.Data.RefusedEdits, editOf(c))
			if n := len(mb.Data.RefusedEdits); n > maxRefusedEdits {
				mb.Data.RefusedEdits = slices.Clone(mb.Data.RefusedEdits[n-maxRefusedEdits:])
			}
			if key, _, ok := ParseMarker(c.Body); ok && key == fmt.Sprintf("questions-%d", mb.Data.Round) {
				if own, err := m.ownComment(ctx, mb, key, c.ID); err != nil {
					return "", err
				} else if own {
					mb.Data.TicksSeen = tickState(c.Body, toRunnerQuestions(qs)) // refused: not taken later
				}
			}
		}
		// One refusal per person and round: sixteen comments are answered once.
		key := fmt.Sprintf("refused-answers-%d-%s", mb.Data.Round, strings.ToLower(author))
		return m.refuseAs(ctx, bot, mb, key, author, "answer my questions")
	}
	rq := toRunnerQuestions(qs)
	if by, closed := roundAnswered(qs); closed {
		// Answered in a pass that failed before it finished (the forge failed a post after
		// the answers were stored): the round is finished as it was answered, by the reply
		// retried (a reply of "ok" stores every default, before the deadline) or by the
		// deadline; the text of a reply is kept as notes.
		if _, _, marked := ParseMarker(c.Body); !marked {
			mb.Data.FreeText = appendNotes(mb.Data.FreeText, author, ParseReply(c.Body, rq).FreeText)
		}
		if at := qs[0].AnsweredAt; by == "default" && (at == nil || !at.Before(qs[0].DeadlineAt)) {
			if _, err := m.deadline(ctx, bot, mb); err != nil {
				return "", err
			}
			return "the defaults applied at the deadline, before this reply", nil
		}
		if by == "default" {
			by = author
		}
		if err := m.answerRound(ctx, mb, nil, by); err != nil {
			return "", err
		}
		return "answered by @" + by, m.afterAnswers(ctx, bot, mb, "@"+by)
	}
	var a Answers
	key, _, marked := ParseMarker(c.Body)
	if marked {
		// A reply may quote Alfred's comment, its hidden marker with it: only the comment Alfred
		// posted under that key is Alfred's (edited by a human: ticks).
		own, err := m.ownComment(ctx, mb, key, c.ID)
		if err != nil {
			return "", err
		}
		marked = own
	}
	if marked {
		if key != fmt.Sprintf("questions-%d", mb.Data.Round) {
			return "edit of another Alfred comment", nil
		}
		// One edit per click. What the edit chose is what it changed from the block as last
		// seen (Data.TicksSeen; the block as rendered, every default ticked alone, before any
		// edit): a tick another made, one the gate refused included, is not this editor's.
		now := tickState(c.Body, rq)
		seen := mb.Data.TicksSeen
		if seen == nil {
			seen = renderedTicks(rq)
		}
		mb.Data.TicksSeen = now
		var open []string // questions with no box, or several, ticked: the first half of a change
		for _, q := range rq {
			if _, ok := now[q.ID]; !ok {
				open = append(open, q.ID)
			}
		}
		if len(rq) == 1 {
			q := rq[0]
			if len(open) > 0 {
				return fmt.Sprintf("ticks recorded: %s has no single option ticked, so the question stays open", q.ID), nil
			}
			if now[q.ID] == seen[q.ID] {
				return "ticks recorded: the tick shown is not this edit's (one the gate refused), so the question stays open", nil
			}
			a = Answers{Choices: map[string]string{q.ID: now[q.ID]}}
		} else {
			// The first click is not the answer to the other questions: the round closes
			// TickQuiet after the last click (timers), at the deadline, or at once when every
			// question was chosen; not while a question has no single box ticked.
			tickEdit(mb, rq, now, seen, author)
			switch {
			case len(open) > 0:
				mb.Data.TicksDue = time.Time{}
				return fmt.Sprintf("ticks recorded: %s has no single option ticked, so the questions stay open", strings.Join(open, ", ")), nil
			case len(mb.Data.Ticks) == 0:
				mb.Data.TicksDue = time.Time{}
				return "ticks recorded: nothing chosen yet, so the questions stay open", nil
			case len(mb.Data.Ticks) < len(rq):
				mb.Data.TicksDue = m.now().Add(TickQuiet)
				return fmt.Sprintf("ticks recorded: the questions close at %s unless more ticks come", deadlineText(mb.Data.TicksDue)), nil
			}
			a.Choices = nil // every question chosen: the ticks answer, by whoever made each
		}
	} else {
		if ev.Type == forge.EventCommentEdited {
			// A reply edited into an answer ("let me check" → "b") answers, if it was written
			// after the questions: an older comment edited (a typo fixed) is no reply to them.
			// An edit that answers nothing was kept as notes when it was written.
			after, err := m.afterQuestions(ctx, mb, c.ID)
			if err != nil {
				return "", err
			}
			if a = ParseReply(c.Body, rq); !after || (len(a.Choices) == 0 && !a.Defaults) {
				return "edited comment recorded", nil
			}
		} else {
			a = ParseReply(c.Body, rq)
			// A comment written before the block (held while the analysis ran, then applied)
			// is no reply to it, whatever it says ("👍" to "I am on it").
			before, err := m.beforeQuestions(ctx, mb, c.ID)
			if err != nil {
				return "", err
			}
			if before {
				mb.Data.FreeText = appendNotes(mb.Data.FreeText, author, a.FreeText)
				return "comment written before the questions kept as context: it answers none of them, so they stay open", nil
			}
		}
		if len(a.Choices) == 0 && !a.Defaults {
			// A comment that answers nothing ("I'll look at this tomorrow") leaves the round
			// open; what it says is kept for the agent.
			mb.Data.FreeText = appendNotes(mb.Data.FreeText, author, a.FreeText)
			return "comment kept as context: it answers no question, so the questions stay open", nil
		}
	}
	choices, authors := a.Choices, map[string]string(nil)
	if len(mb.Data.Ticks) > 0 {
		// Ticks waiting, then a reply or the last tick: its answers, and the ticks (by whoever
		// ticked them) for the questions it leaves; "ok" takes the defaults of the others only.
		// A choice the ticks already held keeps its author.
		choices, authors = maps.Clone(mb.Data.Ticks), maps.Clone(mb.Data.TicksBy)
		if authors == nil {
			authors = map[string]string{}
		}
		for q, o := range a.Choices {
			if choices[q] != o || authors[q] == "" {
				choices[q], authors[q] = o, author
			}
		}
	}
	if err := m.answerRoundBy(ctx, mb, choices, authors, author); err != nil {
		return "", err
	}
	mb.Data.FreeText = appendNotes(mb.Data.FreeText, author, a.FreeText)
	who := mentions(authors, author)
	return "answered by " + who, m.afterAnswers(ctx, bot, mb, who)
}

// mentions names who answered: the authors of the choices (qid → login) and who, each once,
// as "@alice" or "@alice and @bob".
func mentions(authors map[string]string, who string) string {
	var out []string
	for _, l := range append(slices.Collect(maps.Values(authors)), who) {
		if l != "" && !slices.Contains(out, "@"+l) {
			out = append(out, "@"+l)
		}
	}
	slices.Sort(out)
	return strings.Join(out, " and ")
}

// resetTicks forgets the ticks of the round's question block: a new round, or one answered.
func (d *Data) resetTicks() {
	d.Ticks, d.TicksBy, d.TicksSeen, d.TicksDue = nil, nil, nil, time.Time{}
}

// TickQuiet is how long the ticks of a block of several questions wait for the next click
// before they answer the round: each click is an edit of its own, and the first is not the
// answer to the questions after it.
const TickQuiet = time.Minute

// closeTicks answers the round with the ticks waiting (Data.Ticks) once TickQuiet has passed
// since the last click (none while a question has no box ticked: TicksDue zero), or the
// deadline has come; it reports whether it did.
func (m *Machine) closeTicks(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	if len(mb.Data.Ticks) == 0 {
		return false, nil // no choice ticked (TicksDue is zero then): the deadline applies the defaults
	}
	qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil {
		return false, err
	}
	quiet := !mb.Data.TicksDue.IsZero() && !m.now().Before(mb.Data.TicksDue)
	if !quiet && (len(qs) == 0 || m.now().Before(qs[0].DeadlineAt)) {
		return false, nil
	}
	who := mentions(mb.Data.TicksBy, "")
	if err := m.answerRoundBy(ctx, mb, mb.Data.Ticks, mb.Data.TicksBy, ""); err != nil {
		return false, err
	}
	return true, m.afterAnswers(ctx, bot, mb, who)
}

// tickEdit takes an accepted edit of the block of questions qs whose choices are now
// (tickState), the block having shown seen before it: a question it changed is editor's
// choice, or no choice when it left none; the others keep the choice and author they had (none
// for a refused edit's).
func tickEdit(mb *Mailbox, qs []phase.Question, now, seen map[string]string, editor string) {
	if mb.Data.Ticks == nil {
		mb.Data.Ticks = map[string]string{}
	}
	if mb.Data.TicksBy == nil {
		mb.Data.TicksBy = map[string]string{}
	}
	for _, q := range qs {
		if now[q.ID] == seen[q.ID] {
			continue
		}
		if o, ok := now[q.ID]; ok {
			mb.Data.Ticks[q.ID], mb.Data.TicksBy[q.ID] = o, editor
		} else {
			delete(mb.Data.Ticks, q.ID)
			delete(mb.Data.TicksBy, q.ID)
		}
	}
}

// afterQuestions reports whether the comment id was posted after the question block of the
// round: comment ids grow with time on both forges (GitLab note ids, Forgejo comment ids). An
// unknown block id (its post not recorded yet) says no, and so does shadow mode's (negative:
// nothing was posted, so no reply can follow it).
func (m *Machine) afterQuestions(ctx context.Context, mb *Mailbox, id int64) (bool, error) {
	block, err := m.questionBlockID(ctx, mb)
	return block > 0 && id > block, err
}

// beforeQuestions reports whether the comment id was posted before the question block of the
// round, as far as the block's recorded id tells (false when it is not recorded yet).
func (m *Machine) beforeQuestions(ctx context.Context, mb *Mailbox, id int64) (bool, error) {
	block, err := m.questionBlockID(ctx, mb)
	return block > 0 && id < block, err
}

// questionBlockID is the forge's id of the round's question block, 0 while it is not recorded.
func (m *Machine) questionBlockID(ctx context.Context, mb *Mailbox) (int64, error) {
	pc, err := m.store.PostedComment(ctx, mb.ID, fmt.Sprintf("questions-%d", mb.Data.Round))
	if err != nil || pc == nil {
		return 0, err
	}
	return pc.CommentID, nil
}

// ownComment reports whether the comment id is the one Alfred posted under key (or may be: its
// id not recorded yet), not a human's comment that quotes it.
func (m *Machine) ownComment(ctx context.Context, mb *Mailbox, key string, id int64) (bool, error) {
	pc, err := m.store.PostedComment(ctx, mb.ID, key)
	if err != nil {
		return false, err
	}
	return pc != nil && (pc.CommentID == id || pc.CommentID == 0), nil
}

// typeLabel answers the type question with a type:: label the author or a writer added.
func (m *Machine) typeLabel(ctx context.Context, bot Bot, mb *Mailbox, typ, sender string, eventID int64) (string, error) {
	// The label passed the gate already (gateLabels: a state label, the author may set it).
	mb.Type = typ
	if err := m.answerRound(ctx, mb, map[string]string{"q1": mb.Type}, sender); err != nil {
		return "", err
	}
	if err := m.markAnswered(ctx, bot, mb, "@"+sender); err != nil {
		return "", err
	}
	if err := m.handBack(ctx, bot, mb); err != nil {
		return "", err
	}
	return "type set by label", m.afterType(ctx, bot, mb)
}

func toRunnerQuestions(qs []Question) []phase.Question {
	out := make([]phase.Question, 0, len(qs))
	for _, q := range qs {
		out = append(out, phase.Question{ID: q.QID, Title: q.Title, Context: q.Context, Options: q.Options(), Default: q.Default})
	}
	return out
}

// roundAnswered reports whether every question of a round has its answer stored, and who
// answered: the person who chose an option, or "default" when every answer is a default.
func roundAnswered(qs []Question) (by string, answered bool) {
	by = "default"
	for _, q := range qs {
		if q.Answer == nil {
			return "", false
		}
		if who := deref(q.AnsweredBy); who != "" && who != "default" && by == "default" {
			by = who
		}
	}
	return by, len(qs) > 0
}

// answerRound records the choices for the current round; questions left open get their
// default, answered by "default". Questions answered already (by a pass that failed after it
// stored them) keep their answers, which the mailbox's decisions (or type) take again.
func (m *Machine) answerRound(ctx context.Context, mb *Mailbox, choices map[string]string, by string) error {
	return m.answerRoundBy(ctx, mb, choices, nil, by)
}

// answerRoundBy is answerRound with the author of a choice per question where authors names
// one (ticks by one person, a reply by another), by for the others.
func (m *Machine) answerRoundBy(ctx context.Context, mb *Mailbox, choices, authors map[string]string, by string) error {
	qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil {
		return err
	}
	mb.Data.resetTicks() // answered, whichever way
	if mb.Data.Decisions == nil {
		mb.Data.Decisions = map[string]string{}
	}
	asksType := def(mb.State).AsksType
	for _, q := range qs {
		ans := deref(q.Answer)
		if q.Answer == nil {
			who := cmp.Or(authors[q.QID], by)
			if ans = choices[q.QID]; ans == "" {
				ans, who = q.Default, "default"
			}
			if err := m.store.AnswerQuestion(ctx, q.ID, ans, who, m.now()); err != nil {
				return err
			}
		}
		label := ans
		for _, o := range q.Options() {
			if o.ID == ans {
				label = o.Label
			}
		}
		if asksType {
			mb.Type = ans
		} else {
			mb.Data.Decisions[q.QID] = label
		}
	}
	return nil
}

// handBack unassigns the author Alfred assigned to answer; an author a human had assigned
// before the questions (Data.AuthorAssignedByHuman) stays assigned. It does not trust
// mb.Assignees: a late delivery (Gitea sends "opened" after "assigned" for an issue opened
// with assignees) can overwrite it with a list from before the author was assigned.
// SetAssignees reads the issue and changes nothing when the author is not assigned.
func (m *Machine) handBack(ctx context.Context, bot Bot, mb *Mailbox) error {
	byHuman := mb.Data.AuthorAssignedByHuman
	mb.Data.AuthorAssignedByHuman = false
	if byHuman || mb.Author == "" || strings.EqualFold(mb.Author, bot.Login) {
		return nil
	}
	if err := bot.Forge.SetAssignees(ctx, mb.Ref(), nil, []string{mb.Author}); err != nil {
		return fmt.Errorf("unassign the author: %w", err)
	}
	mb.Assignees = slices.DeleteFunc(mb.Assignees, func(s string) bool { return strings.EqualFold(s, mb.Author) })
	return nil
}

// afterAnswers continues once a question round is answered (by a reply, ticks or defaults).
func (m *Machine) afterAnswers(ctx context.Context, bot Bot, mb *Mailbox, by string) error {
	if err := m.markAnswered(ctx, bot, mb, by); err != nil {
		return err
	}
	if err := m.handBack(ctx, bot, mb); err != nil {
		return err
	}
	if def(mb.State).AsksType {
		if l := m.cfg.Labels.TypeLabel(mb.Type); l != "" {
			if err := bot.Forge.SetLabels(ctx, mb.Ref(), []string{l}, nil); err != nil {
				return fmt.Errorf("set the type label: %w", err)
			}
			mb.Labels = append(mb.Labels, l)
		}
		return m.afterType(ctx, bot, mb)
	}
	return m.finishFunctional(ctx, bot, mb)
}

// markAnswered edits the round's question block in place: the chosen options ticked and who
// answered instead of the deadline, so the block tells what was decided.
func (m *Machine) markAnswered(ctx context.Context, bot Bot, mb *Mailbox, by string) error {
	qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil || len(qs) == 0 {
		return err
	}
	chosen := map[string]string{}
	for _, q := range qs {
		chosen[q.QID] = deref(q.Answer)
	}
	notice := "Answered by " + by + "."
	if by == "default" {
		notice = fmt.Sprintf("No answer by %s: the defaults apply.", deadlineText(qs[0].DeadlineAt))
	}
	body := RenderAnswered(mb.Data.QuestionIntro, toRunnerQuestions(qs), chosen, notice)
	return m.post(ctx, bot, mb, fmt.Sprintf("questions-%d", mb.Data.Round), "questions", body)
}

// deadline applies the defaults of the open question block once its deadline has passed, says
// so in the issue and moves on. It reports whether it fired.
func (m *Machine) deadline(ctx context.Context, bot Bot, mb *Mailbox) (bool, error) {
	qs, err := m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil || len(qs) == 0 || m.now().Before(qs[0].DeadlineAt) {
		return false, err
	}
	if err := m.answerRound(ctx, mb, nil, ""); err != nil {
		return false, err
	}
	qs, err = m.store.Questions(ctx, mb.ID, mb.Data.Round)
	if err != nil {
		return false, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "No answer by %s, so I applied the defaults:\n", deadlineText(qs[0].DeadlineAt))
	for _, q := range qs {
		fmt.Fprintf(&b, "\n- **%s. %s** → %s", q.QID, q.Title, optionText(q, deref(q.Answer)))
	}
	if err := m.post(ctx, bot, mb, fmt.Sprintf("defaults-%d", mb.Data.Round), "defaults", b.String()); err != nil {
		return false, err
	}
	return true, m.afterAnswers(ctx, bot, mb, "default")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func optionText(q Question, id string) string {
	for i, o := range q.Options() {
		if o.ID == id {
			return fmt.Sprintf("%s. %s", optionLetter(i), o.Label)
		}
	}
	return id
}

// maxNotesBytes bounds the notes from the discussion kept for the agent (Data.FreeText): a
// flood of comments cannot grow the mailbox's data, the agent's input or the analysis without
// end. The comments themselves stay on the forge.
const maxNotesBytes = 32 << 10

// notesCut starts notes whose beginning was dropped to stay within maxNotesBytes.
const notesCut = "*(Earlier notes are in the issue's comments.)*"

// appendNotes adds what author wrote, beyond the answers, to notes as "@author: text". When
// the notes grow over maxNotesBytes, the oldest are dropped (at a line break, or a rune
// boundary) behind notesCut.
func appendNotes(notes, author, text string) string {
	if text == "" {
		return notes
	}
	notes = strings.TrimSpace(notes + "\n\n@" + author + ": " + text)
	if len(notes) <= maxNotesBytes {
		return notes
	}
	keep := maxNotesBytes - len(notesCut) - 2
	start := len(notes) - keep
	if i := strings.IndexByte(notes[start:], '\n'); i >= 0 && i < keep/2 {
		start += i + 1
	}
	for start < len(notes) && !utf8.RuneStart(notes[start]) {
		start++
	}
	return notesCut + "\n\n" + strings.TrimSpace(notes[start:])
}
