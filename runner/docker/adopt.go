package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/alfred-bot/alfred/runner"
)

// Adopt finds the container named or identified by ref and returns a Handle with Origin
// runner.OriginAdopted (see runner.Runtime.Adopt). It creates, starts and removes nothing.
//
// Errors: no such container (wraps runner.ErrContainerNotFound); a container without
// runner.LabelManaged=true (wraps runner.ErrNotManaged); any daemon error.
func (r *Runtime) Adopt(ctx context.Context, ref string) (runner.Handle, error) {
	if ref == "" {
		return runner.Handle{}, fmt.Errorf("adopt: %w: empty name or id", runner.ErrContainerNotFound)
	}
	info, err := r.cli.ContainerInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return runner.Handle{}, fmt.Errorf("adopt %s: %w", ref, runner.ErrContainerNotFound)
		}
		return runner.Handle{}, fmt.Errorf("adopt %s: inspect: %w", ref, err)
	}
	var labels map[string]string
	if info.Config != nil {
		labels = info.Config.Labels
	}
	if labels[runner.LabelManaged] != "true" {
		return runner.Handle{}, fmt.Errorf("adopt %s: %w (id %.12s)", ref, runner.ErrNotManaged, info.ID)
	}
	h := runner.Handle{ID: runner.ContainerID(info.ID), Name: strings.TrimPrefix(info.Name, "/"),
		Origin: runner.OriginAdopted, Labels: labels}
	if info.HostConfig != nil {
		r.adoptEgress(ctx, h.Name, info.HostConfig)
		r.egressMu.Lock()
		if _, ok := r.egressRuns[h.Name]; ok {
			if r.egressNames == nil {
				r.egressNames = map[runner.ContainerID]string{}
			}
			r.egressNames[h.ID] = h.Name
		}
		r.egressMu.Unlock()
	}
	if info.State != nil {
		h.Running = info.State.Running || info.State.Restarting || info.State.Paused
		if t, err := time.Parse(time.RFC3339Nano, info.State.StartedAt); err == nil && t.Year() > 1 {
			h.StartedAt = t
		}
	}
	return h, nil
}
