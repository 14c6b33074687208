package docker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/egress"
)

// LabelEgressAllow is the label of a run's network holding its egress allowlist (comma-separated
// host:port pairs), so that a restarted Alfred serves the proxy of an adopted run again.
const LabelEgressAllow = "alfred.egress.allow"

// egressRun is one run's internal network and the proxy listening on its gateway.
type egressRun struct {
	network string // the network's name: the container's
	proxy   *egress.Proxy
}

// startEgress creates the run's internal network (named as the container, labelled as it is,
// plus LabelEgressAllow) and starts its proxy on the network's gateway address, at
// egress.Port. It returns the gateway address (the container's ProxyHost). A leftover network of
// the same name (a process stopped between creating it and the container) is removed first,
// when no container holds the name and no container is attached to it.
//
// Errors: an invalid allowlist; a network name held by a live run (wraps
// runner.ErrNameConflict); the proxy's listener (Alfred must run on the Docker host, where the
// gateway address is); any daemon error. Nothing is left behind on error.
func (r *Runtime) startEgress(ctx context.Context, spec runner.ContainerSpec) (gateway string, err error) {
	allow, err := egress.ParseAllowlist(spec.Egress.Allow)
	if err != nil {
		return "", fmt.Errorf("start %s: %w", spec.Name, err)
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelEgressAllow] = strings.Join(spec.Egress.Allow, ",")
	create := func() (network.CreateResponse, error) { return r.createRunNetwork(ctx, spec.Name, labels) }
	r.pruneLeftoverNetworks(ctx, spec.Labels)
	resp, err := create()
	if err != nil && isConflict(err) {
		if _, cerr := r.cli.ContainerInspect(ctx, spec.Name); cerr == nil {
			return "", r.conflict(ctx, spec.Name)
		}
		if rerr := r.removeLeftoverNetwork(ctx, spec.Name); rerr != nil {
			return "", fmt.Errorf("create network %s: %w (%v)", spec.Name, runner.ErrNameConflict, rerr)
		}
		resp, err = create()
	}
	if err != nil {
		return "", fmt.Errorf("create network %s: %w", spec.Name, err)
	}
	gateway, err = r.serveEgress(ctx, resp.ID, spec.Name, allow, spec.Labels)
	if err != nil {
		return "", errors.Join(err, r.removeNetwork(ctx, resp.ID))
	}
	return gateway, nil
}

// DefaultEgressSubnets is the address range the runs' networks are cut from when
// Runtime.EgressSubnets is not set: a /28 each (eleven addresses, one run container), so that
// many runs at once do not exhaust Docker's default pools (about thirty networks).
var DefaultEgressSubnets = netip.MustParsePrefix("10.213.0.0/16")

// egressSubnetBits is the size of one run's network.
const egressSubnetBits = 28

// createRunNetwork creates the internal network of a run on a /28 of EgressSubnets, starting at
// a slot derived from the name and moving on while the daemon reports an overlap.
func (r *Runtime) createRunNetwork(ctx context.Context, name string, labels map[string]string) (network.CreateResponse, error) {
	pool := r.EgressSubnets
	if !pool.IsValid() {
		pool = DefaultEgressSubnets
	}
	pool = pool.Masked()
	if !pool.Addr().Is4() || pool.Bits() > egressSubnetBits {
		return network.CreateResponse{}, fmt.Errorf("egress subnets %s: want an IPv4 range of /%d or larger", pool, egressSubnetBits)
	}
	slots := uint32(1) << (egressSubnetBits - pool.Bits())
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	start := h.Sum32() % slots
	base := binary.BigEndian.Uint32(pool.Addr().AsSlice())
	var lastErr error
	for i := uint32(0); i < min(slots, 256); i++ {
		slot := (start + i) % slots
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+slot<<(32-egressSubnetBits))
		subnet := netip.PrefixFrom(netip.AddrFrom4(b), egressSubnetBits)
		resp, err := r.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: labels,
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet.String(), Gateway: subnet.Addr().Next().String()}}}})
		if err == nil || !strings.Contains(err.Error(), "overlap") {
			return resp, err
		}
		lastErr = err
	}
	return network.CreateResponse{}, fmt.Errorf("no free /%d in %s: %w", egressSubnetBits, pool, lastErr)
}

// serveEgress starts the proxy of network netID (named name) on its gateway and keeps it under
// name.
func (r *Runtime) serveEgress(ctx context.Context, netID, name string, allow egress.Allowlist, labels map[string]string) (string, error) {
	info, err := r.cli.NetworkInspect(ctx, netID, network.InspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect network %s: %w", name, err)
	}
	var gateway string
	for _, c := range info.IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			gateway = c.Gateway
			break
		}
	}
	if gateway == "" {
		return "", fmt.Errorf("network %s has no IPv4 gateway for the egress proxy", name)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway, strconv.Itoa(egress.Port)))
	if err != nil {
		return "", fmt.Errorf("egress proxy of %s on its gateway (Alfred must run on the Docker host): %w", name, err)
	}
	labels = maps.Clone(labels)
	p := egress.Serve(ln, allow, egress.Options{Dial: r.EgressDial, OnRefused: func(target string) {
		if r.OnEgressRefused != nil {
			r.OnEgressRefused(labels, target)
		}
	}})
	r.egressMu.Lock()
	if r.egressRuns == nil {
		r.egressRuns = map[string]*egressRun{}
	}
	r.egressRuns[name] = &egressRun{network: name, proxy: p}
	r.egressMu.Unlock()
	return gateway, nil
}

// withEgress puts the container on its run's network, with ProxyHost resolving to gateway.
func withEgress(hc *container.HostConfig, spec runner.ContainerSpec, gateway string) {
	hc.NetworkMode = container.NetworkMode(spec.Name)
	hc.ExtraHosts = append(hc.ExtraHosts, egress.ProxyHost+":"+gateway)
}

// adoptEgress serves the proxy of an adopted container's run network again (after a restart of
// Alfred), when the container is on one and this process serves none for it yet. A proxy that
// cannot start leaves the run without a way out (it fails closed) and is not an error of Adopt.
func (r *Runtime) adoptEgress(ctx context.Context, name string, mode container.NetworkMode) {
	if !mode.IsUserDefined() || string(mode) != name {
		return
	}
	r.egressMu.Lock()
	_, served := r.egressRuns[name]
	r.egressMu.Unlock()
	if served {
		return
	}
	info, err := r.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return
	}
	list, ok := info.Labels[LabelEgressAllow]
	if !ok || info.Labels[runner.LabelManaged] != "true" {
		return
	}
	var entries []string
	if list != "" {
		entries = strings.Split(list, ",")
	}
	allow, err := egress.ParseAllowlist(entries)
	if err != nil {
		return
	}
	_, _ = r.serveEgress(ctx, info.ID, name, allow, info.Labels)
}

// EgressRefused returns what the proxy of the container's run refused (runner.EgressReporter);
// nil for a container without one in this process.
func (r *Runtime) EgressRefused(id runner.ContainerID) []string {
	r.egressMu.Lock()
	run := r.egressRuns[r.egressNames[id]]
	r.egressMu.Unlock()
	if run == nil {
		return nil
	}
	var out []string
	for _, f := range run.proxy.Refused() {
		out = append(out, f.String())
	}
	return out
}

// stopEgress closes the proxy of the run named name and removes its network (nil if there is
// none).
func (r *Runtime) stopEgress(ctx context.Context, name string) error {
	r.egressMu.Lock()
	run := r.egressRuns[name]
	delete(r.egressRuns, name)
	r.egressMu.Unlock()
	var errs []error
	if run != nil {
		if err := run.proxy.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close egress proxy of %s: %w", name, err))
		}
	}
	if name != "" {
		errs = append(errs, r.removeLeftoverNetwork(ctx, name))
	}
	return errors.Join(errs...)
}

// removeLeftoverNetwork removes the run network name when it is Alfred's (LabelEgressAllow and
// LabelManaged) and no container is attached; nil when there is no such network.
func (r *Runtime) removeLeftoverNetwork(ctx context.Context, name string) error {
	info, err := r.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect network %s: %w", name, err)
	}
	if _, ok := info.Labels[LabelEgressAllow]; !ok || info.Labels[runner.LabelManaged] != "true" {
		return fmt.Errorf("network %s is not an Alfred run's; not touching it", name)
	}
	if len(info.Containers) > 0 {
		return fmt.Errorf("network %s still has %d containers attached", name, len(info.Containers))
	}
	return r.removeNetwork(ctx, info.ID)
}

func (r *Runtime) removeNetwork(ctx context.Context, id string) error {
	if err := r.cli.NetworkRemove(ctx, id); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove network %.12s: %w", id, err)
	}
	return nil
}

// leftoverAge is how old a run network without a container must be before a later run's start
// removes it: older than any gap between creating a network and its container.
const leftoverAge = 10 * time.Minute

// pruneLeftoverNetworks removes, best effort, the run networks of this installation (those
// carrying LabelEgressAllow, LabelManaged and labels' LabelInstance) that no container uses
// and no container is named after, created more than leftoverAge ago: a container removed while
// Alfred was down leaves its network behind.
func (r *Runtime) pruneLeftoverNetworks(ctx context.Context, labels map[string]string) {
	f := filters.NewArgs(filters.Arg("label", LabelEgressAllow), filters.Arg("label", runner.LabelManaged+"=true"))
	if inst, ok := labels[runner.LabelInstance]; ok {
		f.Add("label", runner.LabelInstance+"="+inst)
	}
	list, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return
	}
	for _, n := range list {
		if time.Since(n.Created) < leftoverAge {
			continue
		}
		if _, err := r.cli.ContainerInspect(ctx, n.Name); !cerrdefs.IsNotFound(err) {
			continue // its container exists (or the daemon did not say): not a leftover
		}
		r.egressMu.Lock()
		_, served := r.egressRuns[n.Name]
		r.egressMu.Unlock()
		if !served {
			_ = r.removeLeftoverNetwork(ctx, n.Name)
		}
	}
}
