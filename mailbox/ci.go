package mailbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/alfred-bot/alfred/webhook/forge"
)

// checkCI reads the CI state of the merge request's head commit and moves on: success (or no
// pipeline once ci_wait is over) to review, a failure to a ci_fix run while attempts are left,
// else to blocked. A cancelled pipeline is neither: Alfred says so once and waits in CI for a
// pipeline of the commit that ends.
func (m *Machine) checkCI(ctx context.Context, bot Bot, mb *Mailbox) (string, error) {
	p, err := bot.Forge.CIStatus(ctx, mb.Repo, mb.HeadSHA)
	if err != nil {
		return "", fmt.Errorf("read CI status: %w", err)
	}
	sha7 := short(mb.HeadSHA)
	switch p.State {
	case forge.CISuccess:
		body := fmt.Sprintf("CI passed on %s. The %s is ready for review.", sha7, m.mrWord(bot))
		if err := m.post(ctx, bot, mb, "ci-"+mb.HeadSHA, "ci", body); err != nil {
			return "", err
		}
		if mb.Data.UntilGreen {
			if err := m.dropUntilGreen(ctx, bot, mb, fmt.Sprintf("CI is green on %s: I removed `%s`.", sha7, m.cfg.Labels.RetryUntilGreen)); err != nil {
				return "", err
			}
		}
		return "ci passed", m.follow(ctx, bot, mb, onCIPassed)
	case forge.CIFailed:
		if mb.Data.UntilGreen {
			if mb.Data.UntilGreenRuns >= m.cfg.RetryUntilGreenMax {
				return "ci failed", m.untilGreenCeiling(ctx, bot, mb, StateCIFix)
			}
			mb.Data.UntilGreenRuns++
		} else if mb.Data.CIAttempts >= m.settings(mb.Repo).CIFixAttempts {
			return "ci failed", m.block(ctx, bot, mb, onCIExhausted, StateCIFix,
				fmt.Sprintf("CI still fails on %s after %d fix attempts.", sha7, mb.Data.CIAttempts))
		}
		mb.Data.CIAttempts++
		mb.Data.CILog = formatFailedJobs(p.FailedJobs)
		return "ci failed: fixing", m.follow(ctx, bot, mb, onCIFailed)
	case forge.CIPending:
		return "ci pending", nil
	case forge.CICanceled:
		body := fmt.Sprintf("CI was cancelled on %s before it ended, so there is nothing for me to fix. "+
			"I go on when a pipeline of this commit ends: run it again from its page.", sha7)
		if err := m.post(ctx, bot, mb, "ci-canceled-"+mb.HeadSHA, "ci", body); err != nil {
			return "", err
		}
		return "ci cancelled: waiting for a pipeline that ends", nil
	}
	if m.now().Before(mb.Data.CIWaitUntil) {
		return "waiting for a pipeline", nil
	}
	body := fmt.Sprintf("No pipeline ran on this %s. It is ready for review.", m.mrWord(bot))
	if err := m.post(ctx, bot, mb, "no-pipeline-"+mb.HeadSHA, "ci", body); err != nil {
		return "", err
	}
	return "no pipeline", m.follow(ctx, bot, mb, onCIPassed)
}

// short returns the 7-character abbreviation of a commit id.
func short(sha string) string { return sha[:min(7, len(sha))] }

func formatFailedJobs(jobs []forge.FailedJob) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "## %s\n", j.Name)
		if j.WebURL != "" {
			fmt.Fprintf(&b, "%s\n", j.WebURL)
		}
		if j.Log != "" {
			fmt.Fprintf(&b, "```\n%s\n```\n", strings.TrimSpace(j.Log))
		}
	}
	return b.String()
}
