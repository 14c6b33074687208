package docker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// FindSelf returns the id of the container this process runs in on cli's engine, for
// Runtime.SelfContainer; "" when it runs in none (on the Docker host), in a container of another
// engine, or in one on the host's network (there the run networks' gateways are its own
// addresses, and the proxies listen on them).
//
// The candidates are the container ids in the sources of this process's /etc/hostname,
// /etc/hosts and /etc/resolv.conf (/proc/self/mountinfo: Docker bind-mounts them from its
// containers/<id>/ directory). A candidate is this process's container only when the engine
// knows it and its hostname is this process's: nothing else is guessed. Errors: the engine's,
// other than an unknown container.
func FindSelf(ctx context.Context, cli *client.Client) (string, error) {
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", nil // not Linux, or no /proc: not in a container Alfred can find
	}
	hostname, _ := os.Hostname()
	for _, id := range selfCandidates(mountinfo) {
		info, err := cli.ContainerInspect(ctx, id)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("find Alfred's own container: inspect %.12s: %w", id, err)
		}
		if info.ID != id || info.Config == nil || info.Config.Hostname != hostname {
			continue
		}
		if info.HostConfig != nil && info.HostConfig.NetworkMode.IsHost() {
			return "", nil
		}
		return info.ID, nil
	}
	return "", nil
}

// containerDir matches the id in the path of a file Docker keeps for a container
// (<data-root>/containers/<id>/hostname, or containers/<id>/… seen from its own file system).
var containerDir = regexp.MustCompile(`(?:^|/)containers/([0-9a-f]{64})/`)

// selfCandidates returns the container ids in the mount roots of /etc/hostname, /etc/hosts and
// /etc/resolv.conf in mountinfo (proc(5): the fourth field is the mount's root within its file
// system, the fifth its mount point), each once, in order.
func selfCandidates(mountinfo []byte) []string {
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		switch f[4] {
		case "/etc/hostname", "/etc/hosts", "/etc/resolv.conf":
		default:
			continue
		}
		if m := containerDir.FindStringSubmatch(f[3]); m != nil && !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}
