package kubernetes

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/alfred-bot/alfred/runner"
)

// follow starts streaming id's log (Follow) unless it is already streamed, so that the
// kubelet's log rotation, which drops the oldest lines of a flood, cannot take the session id
// a CLI prints first; Destroy stops it. Start calls it once the container runs, and Wait
// (after a restart, for an adopted Pod). The kubelet serves only the current log file, and a
// follow can open only once the container runs: what the kubelet rotates away before the
// stream is open (its log manager looks every 10 s, containerLogMonitorInterval, and rotates
// a file above containerLogMaxSize, 10 MiB by default) is lost to the head, which then begins
// where the current file does.
func (r *Runtime) follow(id runner.ContainerID) {
	if _, ok := r.followers.Load(id); ok {
		return
	}
	f := runner.FollowLogs(func(ctx context.Context) (io.ReadCloser, error) {
		return r.pods().GetLogs(string(id), &corev1.PodLogOptions{Container: ContainerName, Follow: true}).Stream(ctx)
	}, func(stdout, _ io.Writer, rc io.Reader) error {
		_, err := io.Copy(stdout, rc)
		return err
	}, r.MaxLogBytes)
	if _, loaded := r.followers.LoadOrStore(id, f); loaded {
		f.Stop()
	}
}

// unfollow stops and forgets id's log stream (Destroy).
func (r *Runtime) unfollow(id runner.ContainerID) {
	if v, ok := r.followers.LoadAndDelete(id); ok {
		v.(*runner.LogFollower).Stop()
	}
}

// Logs returns what the container wrote, stdout and stderr merged by Kubernetes' log API in
// the order the lines were written, as stdout; stderr is always empty. The log is kept in a
// runner.LogBuffer: beyond runner.MaxLogBytes its head and tail around a marker
// (runner.LogDropped). The log is read now; once Wait has seen the container end, the head of
// what the follow kept (which the kubelet may have rotated away since) replaces the
// head of a read that dropped some (runner.JoinLogs).
func (r *Runtime) Logs(ctx context.Context, id runner.ContainerID) (stdout, stderr []byte, err error) {
	var head *runner.LogBuffer
	if v, ok := r.followers.Load(id); ok {
		out, _, ok, err := v.(*runner.LogFollower).Logs(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("read logs of pod %s: %w", id, err)
		}
		if ok {
			head = out
		}
	}
	rc, err := r.pods().GetLogs(string(id), &corev1.PodLogOptions{Container: ContainerName}).Stream(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read logs of pod %s: %w", id, err)
	}
	defer rc.Close()
	buf := runner.NewLogBuffer(r.MaxLogBytes)
	if _, err := io.Copy(buf, rc); err != nil {
		return buf.Bytes(), nil, fmt.Errorf("read logs of pod %s: %w", id, err)
	}
	if head != nil {
		return runner.JoinLogs(head, buf), nil, nil
	}
	return buf.Bytes(), nil, nil
}
