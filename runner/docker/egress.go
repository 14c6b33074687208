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
	"syscall"
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

// egressRun is one run's internal network and the proxy listening on its gateway (or, with
// SelfContainer, on Alfred's own address in it).
type egressRun struct {
	network string // the network's name: the container's
	proxy   *egress.Proxy
}

// startEgress creates the run's internal network (named as the container, labelled as it is,
// plus LabelEgressAllow) and starts its proxy at egress.Port on the network's gateway address,
// or with SelfContainer on Alfred's own address in it (SelfAddress, the container joined to the
// network). It returns that address (the container's ProxyHost). A leftover network of
// the same name (a process stopped between creating it and the container) is removed first,
// when no container holds the name and no container is attached to it.
//
// Errors: an invalid allowlist; a network name held by a live run (wraps
// runner.ErrNameConflict); the proxy's listener (Alfred runs in a container, and
// SelfContainer is not set); Alfred's container cannot join the network; any daemon error.
// Nothing is left behind on error.
func (r *Runtime) startEgress(ctx context.Context, spec runner.ContainerSpec) (addr string, err error) {
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
	addr, err = r.serveEgress(ctx, resp.ID, spec.Name, allow, spec.Labels, "")
	if err != nil {
		return "", errors.Join(err, r.removeLeftoverNetwork(context.WithoutCancel(ctx), resp.ID))
	}
	return addr, nil
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
		resp, err := r.networkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: labels,
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet.String(), Gateway: subnet.Addr().Next().String()}}}})
		if err == nil || !strings.Contains(err.Error(), "overlap") {
			return resp, err
		}
		lastErr = err
	}
	return network.CreateResponse{}, fmt.Errorf("no free /%d in %s: %w", egressSubnetBits, pool, lastErr)
}

// firewallRetries bounds the attempts of a network creation the daemon failed on its own
// firewall rules (isFirewallRace); firewallBackoff is the wait before the second, doubled
// before each next one.
const (
	firewallRetries = 5
	firewallBackoff = 100 * time.Millisecond
)

// networkCreate creates a network, again when the daemon failed on its own firewall rules while
// another network was created or removed at the same time (isFirewallRace): that failure is
// the daemon's race, not the request's, and creating again succeeds. Any other error is
// returned at once.
func (r *Runtime) networkCreate(ctx context.Context, name string, opts network.CreateOptions) (network.CreateResponse, error) {
	wait := firewallBackoff
	for attempt := 1; ; attempt++ {
		resp, err := r.cli.NetworkCreate(ctx, name, opts)
		if err == nil || !isFirewallRace(err) || attempt == firewallRetries {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return resp, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// isFirewallRace tells the daemon's failure to update its iptables rules while another network
// changes, as Docker 20.10 with iptables-nft reports it: "unable to remove jump to
// DOCKER-ISOLATION-STAGE-1 rule in FORWARD chain: (iptables failed: iptables --wait -D FORWARD
// -j DOCKER-ISOLATION-STAGE-1: … RULE_DELETE failed (No such file or directory) …)", seen when
// runs start at the same time.
func isFirewallRace(err error) bool {
	return strings.Contains(err.Error(), "iptables failed")
}

// serveEgress starts the proxy of network netID (named name) and keeps it under name. It
// listens at want when set (the address an adopted run was given), else on the network's
// gateway, or with SelfContainer on SelfAddress of its subnet (proxyAddress).
func (r *Runtime) serveEgress(ctx context.Context, netID, name string, allow egress.Allowlist, labels map[string]string, want string) (string, error) {
	info, err := r.cli.NetworkInspect(ctx, netID, network.InspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect network %s: %w", name, err)
	}
	addr, err := r.proxyAddress(ctx, info, want)
	if err != nil {
		return "", fmt.Errorf("egress proxy of %s: %w", name, err)
	}
	ln, err := r.listenEgress(ctx, addr)
	if err != nil {
		hint := "Alfred runs on the Docker host, or in a container of it found by runner.egress.self_container"
		return "", fmt.Errorf("egress proxy of %s on %s (%s): %w", name, addr, hint, err)
	}
	labels = maps.Clone(labels)
	p := egress.Serve(ln, allow, egress.Options{Dial: r.EgressDial, OnRefused: func(target string, first bool) {
		if r.OnEgressRefused != nil {
			r.OnEgressRefused(labels, target, first)
		}
	}})
	r.egressMu.Lock()
	if r.egressRuns == nil {
		r.egressRuns = map[string]*egressRun{}
	}
	r.egressRuns[name] = &egressRun{network: name, proxy: p}
	r.egressMu.Unlock()
	return addr, nil
}

// SelfAddress is the address Alfred's own container takes on a run's network of subnet (with
// Runtime.SelfContainer): the second of the subnet, the first being the gateway. It is fixed,
// so that an Alfred container recreated while a run goes on finds the run's proxy address again.
func SelfAddress(subnet netip.Prefix) netip.Addr {
	return subnet.Masked().Addr().Next().Next()
}

// proxyAddress returns where the proxy of the run network info listens: want when set (an
// adopted run's ProxyHost), else the network's IPv4 gateway or, with SelfContainer,
// SelfAddress of its subnet. With SelfContainer, Alfred's container is connected to the network
// at that address first (unless it is already there).
func (r *Runtime) proxyAddress(ctx context.Context, info network.Inspect, want string) (string, error) {
	var subnet netip.Prefix
	var gateway string
	for _, c := range info.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
			subnet, gateway = p.Masked(), c.Gateway
			break
		}
	}
	if !subnet.IsValid() {
		return "", fmt.Errorf("network %s has no IPv4 subnet", info.Name)
	}
	if r.SelfContainer == "" {
		if gateway == "" {
			return "", fmt.Errorf("network %s has no IPv4 gateway", info.Name)
		}
		if want != "" && want != gateway {
			return "", fmt.Errorf("the run's proxy is at %s, not its network's gateway %s: it was started by an Alfred in a container (runner.egress.self_container)", want, gateway)
		}
		return gateway, nil
	}
	self, err := r.self(ctx)
	if err != nil {
		return "", err
	}
	addr := want
	if addr == "" {
		addr = SelfAddress(subnet).String()
	}
	if ep, ok := info.Containers[self]; ok {
		if p, err := netip.ParsePrefix(ep.IPv4Address); err == nil && p.Addr().String() == addr {
			return addr, nil // joined before a restart of Alfred's process or container
		}
		return "", fmt.Errorf("Alfred's container %.12s is on network %s at %s, not %s", self, info.Name, ep.IPv4Address, addr)
	}
	err = r.cli.NetworkConnect(ctx, info.ID, self, &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: addr}})
	if err != nil {
		return "", fmt.Errorf("connect Alfred's container %.12s to network %s at %s: %w", self, info.Name, addr, err)
	}
	return addr, nil
}

// listenEgress listens at addr:egress.Port. With SelfContainer, an address not there yet
// (EADDRNOTAVAIL: the engine just connected the container) is tried again, for a bounded
// while.
func (r *Runtime) listenEgress(ctx context.Context, addr string) (net.Listener, error) {
	hostPort := net.JoinHostPort(addr, strconv.Itoa(egress.Port))
	for i := 0; ; i++ {
		ln, err := net.Listen("tcp", hostPort)
		if err == nil || r.SelfContainer == "" || i >= 50 || !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return ln, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// self returns SelfContainer's full id (inspected once).
func (r *Runtime) self(ctx context.Context) (string, error) {
	r.selfMu.Lock()
	defer r.selfMu.Unlock()
	if r.selfID != "" {
		return r.selfID, nil
	}
	info, err := r.cli.ContainerInspect(ctx, r.SelfContainer)
	if err != nil {
		return "", fmt.Errorf("Alfred's own container %q (runner.egress.self_container): %w", r.SelfContainer, err)
	}
	if info.HostConfig != nil && info.HostConfig.NetworkMode.IsHost() {
		return "", fmt.Errorf("Alfred's own container %q is on the host network: its proxies listen on the gateways; leave runner.egress.self_container empty", r.SelfContainer)
	}
	r.selfID = info.ID
	return r.selfID, nil
}

// withEgress puts the container on its run's network, with ProxyHost resolving to addr (where
// its proxy listens).
func withEgress(hc *container.HostConfig, spec runner.ContainerSpec, addr string) {
	hc.NetworkMode = container.NetworkMode(spec.Name)
	hc.ExtraHosts = append(hc.ExtraHosts, egress.ProxyHost+":"+addr)
}

// proxyHostEntry returns the address ProxyHost resolves to in a container's extra hosts ("" if
// none): where its run's proxy listened when it started.
func proxyHostEntry(extraHosts []string) string {
	for _, h := range extraHosts {
		name, addr, ok := strings.Cut(h, ":")
		if !ok {
			name, addr, ok = strings.Cut(h, "=")
		}
		if ok && name == egress.ProxyHost {
			return addr
		}
	}
	return ""
}

// adoptEgress serves the proxy of an adopted container's run network again (after a restart of
// Alfred), when the container is on one and this process serves none for it yet, at the address
// the container was given (its ProxyHost entry of hc.ExtraHosts; with SelfContainer, Alfred's
// container joins the network there again unless it still is on it). A proxy that cannot start
// leaves the run without a way out (it fails closed) and is not an error of Adopt.
func (r *Runtime) adoptEgress(ctx context.Context, name string, hc *container.HostConfig) {
	mode := hc.NetworkMode
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
	_, _ = r.serveEgress(ctx, info.ID, name, allow, info.Labels, proxyHostEntry(hc.ExtraHosts))
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

// removeLeftoverNetwork removes the run network name (or id) when it is Alfred's
// (LabelEgressAllow and LabelManaged) and no container but Alfred's own (SelfContainer, which
// it disconnects first) is attached; nil when there is no such network.
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
	attached := len(info.Containers)
	if attached > 0 && r.SelfContainer != "" {
		self, err := r.self(ctx)
		if err != nil {
			return fmt.Errorf("network %s: %w", name, err)
		}
		if _, ok := info.Containers[self]; ok {
			if err := r.cli.NetworkDisconnect(ctx, info.ID, self, true); err != nil && !cerrdefs.IsNotFound(err) {
				return fmt.Errorf("disconnect Alfred's container %.12s from network %s: %w", self, name, err)
			}
			attached--
		}
	}
	if attached > 0 {
		return fmt.Errorf("network %s still has %d containers attached", name, attached)
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
// carrying LabelEgressAllow, LabelManaged and labels' LabelInstance) that no container but
// Alfred's own uses and no container is named after, created more than leftoverAge ago: a container removed while
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
