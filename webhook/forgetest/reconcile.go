package forgetest

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// This file holds what reconciliation reads (the bot's assigned issues, comments since a time)
// and the seeding helpers that act as a human would while Alfred is not listening: they
// change the forge without any webhook.

// assignedIssue is one issue of a cross-repository search with its repository.
type assignedIssue struct {
	repo *modelRepo
	is   *modelIssue
}

// assignedLocked returns the open issues (not merge requests) assigned to login and updated at
// or after since (zero: all), most recently updated first (ties: higher number first).
func (m *model) assignedLocked(login string, since time.Time) []assignedIssue {
	var out []assignedIssue
	for _, r := range m.repos {
		for _, is := range r.issues {
			if is.mr || is.state != "open" || is.updated.Before(since) {
				continue
			}
			if slices.ContainsFunc(is.assignees, func(a string) bool { return strings.EqualFold(a, login) }) {
				out = append(out, assignedIssue{repo: r, is: is})
			}
		}
	}
	slices.SortFunc(out, func(a, b assignedIssue) int {
		if c := b.is.updated.Compare(a.is.updated); c != 0 {
			return c
		}
		if c := strings.Compare(a.repo.path, b.repo.path); c != 0 {
			return c
		}
		return int(b.is.number - a.is.number)
	})
	return out
}

// commentsSinceLocked returns the plain comments created or edited at or after since, oldest
// first.
func commentsSinceLocked(is *modelIssue, since time.Time) []*modelComment {
	var out []*modelComment
	for _, c := range is.comments {
		if !c.system && !c.updated.Before(since) {
			out = append(out, c)
		}
	}
	return out
}

// AssignedIssues lists the open issues assigned to the bot, most recently updated first.
func (f *Fake) AssignedIssues(ctx context.Context, since time.Time, limit int) (out []forge.Issue, err error) {
	if err := f.enter(ctx, "AssignedIssues", "", forge.IssueRef{}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.assignedLocked(BotLogin, since) {
		out = append(out, forge.Issue{
			Ref: forge.IssueRef{Repo: a.repo.path, Number: a.is.number}, Title: a.is.title, Body: a.is.body,
			State: a.is.state, Author: forge.User{ID: a.is.author.id, Login: a.is.author.login, Bot: a.is.author.bot},
			Labels: seedNonNil(slices.Clone(a.is.labels)), Assignees: seedNonNil(slices.Clone(a.is.assignees)),
			UpdatedAt: a.is.updated,
		})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// CommentsSince lists the comments created or edited at or after since, oldest first.
func (f *Fake) CommentsSince(ctx context.Context, ref forge.IssueRef, since time.Time) (out []forge.Comment, err error) {
	err = f.withIssue(ctx, "CommentsSince", ref, []string{since.UTC().Format(time.RFC3339)}, func(is *modelIssue) error {
		for _, c := range commentsSinceLocked(is, since) {
			out = append(out, c.forge())
		}
		return nil
	})
	return out, err
}

// SetIssueLabels replaces the labels of an issue or merge request as actor would in the web
// interface (creating missing repository labels), without any webhook: it records the
// activity and moves the updated time.
func (m *model) SetIssueLabels(ref forge.IssueRef, actor string, labels ...string) {
	m.AddUser(actor)
	m.mu.Lock()
	defer m.mu.Unlock()
	is := m.mustIssueLocked(ref)
	r := m.mustRepoLocked(ref.Repo)
	var next []string
	for _, l := range labels {
		m.ensureLabelLocked(r, l, DefaultLabelColor)
		if !slices.Contains(next, l) {
			next = append(next, l)
		}
	}
	m.setLabelsLocked(is, m.mustUserLocked(actor), next)
}

// setLabelsLocked replaces is.labels by next, recording one activity per change by u.
func (m *model) setLabelsLocked(is *modelIssue, u *modelUser, next []string) {
	now := m.now()
	for _, l := range is.labels {
		if !slices.Contains(next, l) {
			is.activity = append(is.activity, forge.Activity{Kind: forge.ActivityLabelRemoved, Label: l, Actor: u.forge(), At: now})
		}
	}
	for _, l := range next {
		if !slices.Contains(is.labels, l) {
			is.activity = append(is.activity, forge.Activity{Kind: forge.ActivityLabelAdded, Label: l, Actor: u.forge(), At: now})
		}
	}
	is.labels, is.updated = next, now
}

// SetIssueAssignees replaces the assignees of an issue or merge request (logins must exist) as
// actor would, without any webhook: it records the activity (on GitLab also the system note
// "assigned to @…" / "unassigned @…") and moves the updated time.
func (m *model) SetIssueAssignees(ref forge.IssueRef, actor string, logins ...string) {
	m.AddUser(actor)
	m.mu.Lock()
	defer m.mu.Unlock()
	is := m.mustIssueLocked(ref)
	var next []string
	for _, a := range logins {
		next = append(next, m.mustUserLocked(a).login)
	}
	m.setAssigneesLocked(is, m.mustUserLocked(actor), next)
}

// setAssigneesLocked replaces is.assignees by next, recording the changes made by u.
func (m *model) setAssigneesLocked(is *modelIssue, u *modelUser, next []string) {
	now := m.now()
	var added, removed []string
	for _, a := range is.assignees {
		if !slices.Contains(next, a) {
			removed = append(removed, "@"+a)
			is.activity = append(is.activity, forge.Activity{Kind: forge.ActivityUnassigned, Login: a, Actor: u.forge(), At: now})
		}
	}
	for _, a := range next {
		if !slices.Contains(is.assignees, a) {
			added = append(added, "@"+a)
			is.activity = append(is.activity, forge.Activity{Kind: forge.ActivityAssigned, Login: a, Actor: u.forge(), At: now})
		}
	}
	if !m.sharedNumbers && len(added)+len(removed) > 0 { // GitLab's system note
		var parts []string
		if len(added) > 0 {
			parts = append(parts, "assigned to "+toSentence(added))
		}
		if len(removed) > 0 {
			parts = append(parts, "unassigned "+toSentence(removed))
		}
		c := &modelComment{id: m.nextID(), body: strings.Join(parts, " and "), author: u, system: true, created: now, updated: now}
		is.comments = append(is.comments, c)
	}
	is.assignees, is.updated = next, now
}

// SetIssueState closes ("closed") or reopens ("open") an issue or merge request as actor
// would, without any webhook: it records the activity and moves the updated time.
func (m *model) SetIssueState(ref forge.IssueRef, actor, state string) {
	m.AddUser(actor)
	m.mu.Lock()
	defer m.mu.Unlock()
	is := m.mustIssueLocked(ref)
	m.setStateLocked(is, m.mustUserLocked(actor), state)
}

func (m *model) setStateLocked(is *modelIssue, u *modelUser, state string) {
	if is.state == state || is.state == "merged" {
		return
	}
	now := m.now()
	kind := forge.ActivityClosed
	if state == "open" {
		kind = forge.ActivityReopened
	}
	is.activity = append(is.activity, forge.Activity{Kind: kind, Actor: u.forge(), At: now})
	is.state, is.updated = state, now
}

// snapshot is an issue's labels, assignees and state before a change through the API.
type snapshot struct {
	labels, assignees []string
	state             string
}

func snap(is *modelIssue) snapshot {
	return snapshot{labels: slices.Clone(is.labels), assignees: slices.Clone(is.assignees), state: is.state}
}

// recordLocked records, as made by u, the changes of is since before (a change through the API:
// the bot's, since the token is the bot's).
func (m *model) recordLocked(is *modelIssue, u *modelUser, before snapshot) {
	after := snap(is)
	is.labels, is.assignees, is.state = before.labels, before.assignees, before.state
	if !slices.Equal(before.labels, after.labels) {
		m.setLabelsLocked(is, u, after.labels)
	}
	if !slices.Equal(before.assignees, after.assignees) {
		m.setAssigneesLocked(is, u, after.assignees)
	}
	if before.state != after.state && after.state != "merged" {
		m.setStateLocked(is, u, after.state)
	}
	is.labels, is.assignees, is.state = after.labels, after.assignees, after.state
}

// activitySinceLocked returns the activity at or after since, oldest first.
func activitySinceLocked(is *modelIssue, since time.Time) []forge.Activity {
	var out []forge.Activity
	for _, a := range is.activity {
		if !a.At.Before(since) {
			out = append(out, a)
		}
	}
	return out
}

// Activity lists the issue's label, assignee and state changes at or after since.
func (f *Fake) Activity(ctx context.Context, ref forge.IssueRef, since time.Time) (out []forge.Activity, err error) {
	err = f.withIssue(ctx, "Activity", ref, nil, func(is *modelIssue) error {
		out = activitySinceLocked(is, since)
		return nil
	})
	return out, err
}

func (u *modelUser) forge() forge.User { return forge.User{ID: u.id, Login: u.login, Bot: u.bot} }

// EditCommentAs replaces a comment's body as its author would, without any webhook.
func (m *model) EditCommentAs(ref forge.IssueRef, id int64, body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	is := m.mustIssueLocked(ref)
	for _, c := range is.comments {
		if c.id == id {
			c.body, c.updated = body, m.now()
			is.updated = c.updated
			return
		}
	}
	panic("forgetest: unknown comment")
}

// toSentence joins words as GitLab's system notes do (Rails' Array#to_sentence): "a", "a and
// b", "a, b, and c".
func toSentence(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	case 2:
		return words[0] + " and " + words[1]
	}
	return strings.Join(words[:len(words)-1], ", ") + ", and " + words[len(words)-1]
}
