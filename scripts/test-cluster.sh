#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, on loopback only, for the tests of the
# Kubernetes runtime (spec/kubernetes.md): kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet built from the Kubernetes module source the Go module proxy serves,
# Debian 12's etcd, containerd, runc and CNI plugins, and a pause image built here (no image
# registry is reachable: images are imported into containerd's k8s.io namespace). NetworkPolicy
# is enforced by kube-router's firewall alone (github.com/cloudnativelabs/kube-router/v2, built
# from the module source too; no routing, no service proxy), with iptables and ipset, beside the
# bridge plugin: the runs' egress allowlist (spec/security.md) is tested against it.
#
#   bash scripts/test-cluster.sh up       build what is missing, start the cluster, wait until
#                                         its node is Ready; prints the kubeconfig's path
#   bash scripts/test-cluster.sh import IMAGE...
#                                         copy images from the Docker engine into the cluster;
#                                         returns once the kubelet can run them
#   bash scripts/test-cluster.sh forget IMAGE...
#                                         remove imported images from the cluster (absent: fine)
#   bash scripts/test-cluster.sh report IMAGE...
#                                         what the cluster knows of imported images: containerd's
#                                         record, the CRI plugin's events, the kubelet's image GC
#   bash scripts/test-cluster.sh down     delete every pod, stop everything, remove the state
#   bash scripts/test-cluster.sh env      print KUBECONFIG=… for eval
#
#   ALFRED_K8S_VERSION   Kubernetes version (default v1.34.4; staging modules at v0.<minor>.<patch>)
#   ALFRED_K8S_CACHE     where the built binaries are kept between runs (default
#                        /var/cache/alfred-k8s); a fresh machine builds them once (about 10 to
#                        15 minutes on 2 cores)
#   ALFRED_K8S_DIR       the cluster's state, certificates, logs and sockets (default
#                        /tmp/alfred-k8s); `down` removes it
#   ALFRED_K8S_NETPOL_VERSION
#                        kube-router version (default v2.1.0, the newest the module proxy has)
#
# Needs root (containerd, kubelet), Go, Docker (to build the pause image), and the Debian
# packages etcd-server, containerd, runc, containernetworking-plugins, openssl, iptables and
# ipset, which it installs when missing. Ports, all on 127.0.0.1: etcd 23790/23800, kube-apiserver 16443, kubelet
# 10350 (healthz 10348), controller-manager 10357, scheduler 10359.
#
# What this machine needs that a stock kubelet set-up does not (found by running it here):
#   - containerd's restrict_oom_score_adj: the sandbox's oom_score_adj of -998 is refused
#     inside this machine's own container ("can't get final child's PID from pipe: EOF");
#   - the node is named localhost and kube-apiserver reaches the kubelet by Hostname: the
#     kubelet refuses a loopback node IP, and test traffic stays on loopback;
#   - failCgroupV1: false (the machine has cgroup v1) and failSwapOn: false;
#   - NetworkPolicy by kube-router rather than sigs.k8s.io/kube-network-policies: the latter
#     sends packets to user space with nftables' queue expression, which this machine's kernel
#     lacks (CONFIG_NFT_QUEUE unset: "Could not process rule"), and it filters at postrouting,
#     which traffic from a Pod to the node's own addresses never crosses; kube-router's iptables
#     chains hook INPUT, FORWARD and OUTPUT.
set -euo pipefail

VERSION=${ALFRED_K8S_VERSION:-v1.34.4}
CACHE=${ALFRED_K8S_CACHE:-/var/cache/alfred-k8s}
DIR=${ALFRED_K8S_DIR:-/tmp/alfred-k8s}
BIN=$CACHE/$VERSION/bin
SOCK=$DIR/run/containerd.sock
NODE=localhost
NETPOL_VERSION=${ALFRED_K8S_NETPOL_VERSION:-v2.1.0}
NETPOL=$CACHE/kube-router/$NETPOL_VERSION/kube-router
PAUSE=registry.k8s.io/pause:3.10
KUBECTL=("$BIN/kubectl" --kubeconfig "$DIR/etc/admin.kubeconfig")

log() { printf 'test-cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# elapsed START prints the time since START (a $SECONDS value) as 3m07s.
elapsed() {
	local s=$((SECONDS - $1))
	printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# timed LABEL COMMAND...: runs COMMAND, says every minute that LABEL is still running and, at
# the end, how long it took; returns COMMAND's status.
timed() {
	local label=$1 start=$SECONDS hb rc=0
	shift
	(while sleep 60; do log "  ... $label: $(elapsed "$start") so far"; done) &
	hb=$!
	"$@" || rc=$?
	kill "$hb" 2>/dev/null || true
	wait "$hb" 2>/dev/null || true
	if [ "$rc" -eq 0 ]; then
		log "$label: done in $(elapsed "$start")"
	else
		log "$label: failed after $(elapsed "$start")"
	fi
	return "$rc"
}

[ "$(id -u)" -eq 0 ] || die "needs root (containerd and the kubelet manage namespaces, mounts and cgroups)"
export PATH="/usr/local/go/bin:$PATH"

packages() {
	local missing=()
	command -v etcd >/dev/null || missing+=(etcd-server)
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v openssl >/dev/null || missing+=(openssl)
	command -v iptables-save >/dev/null || missing+=(iptables)
	command -v ipset >/dev/null || missing+=(ipset)
	if [ ${#missing[@]} -gt 0 ]; then
		# --no-upgrade: what is installed stays at its version (a dependency that needs a newer
		# one is still upgraded by apt, and apt lists it).
		log "installing ${missing[*]} (the cluster's store, container runtime, network plugins, certificates and NetworkPolicy firewall)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-upgrade "${missing[@]}" >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-upgrade "${missing[@]}" >/dev/null; }
	fi
}

# build compiles the Kubernetes binaries from the module source once per version.
build() {
	local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
	local c have=1
	for c in "${cmds[@]}"; do [ -x "$BIN/$c" ] || have=0; done
	[ "$have" = 1 ] && return
	local src=$CACHE/$VERSION/src staging=v0.${VERSION#v1.}
	mkdir -p "$src" "$BIN"
	log "building Kubernetes $VERSION into $BIN (once per machine: ${#cmds[@]} binaries; 7 to 13 minutes on an idle 2-core machine, 30 to 45 on a loaded one; the first binary compiles most of the packages the others share)"
	local all=$SECONDS
	(
		cd "$src"
		printf 'module alfredtestcluster\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n' "$VERSION" >go.mod
		timed "download k8s.io/kubernetes $VERSION" env GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$VERSION" >/dev/null
		local modfile
		modfile=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "k8s.io/kubernetes")/go.mod
		# The staging modules are nested modules, not in k8s.io/kubernetes's zip: take them from
		# the proxy at the matching version.
		{ echo 'replace ('; sed -n '/^replace (/,/^)/p' "$modfile" | awk '/=>/ {print "\t" $1 " => " $1 " '"$staging"'"}'; echo ')'; } >>go.mod
		printf '//go:build tools\n\npackage tools\n\nimport (\n' >tools.go
		for c in "${cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >>tools.go; done
		printf ')\n' >>tools.go
		timed "download the modules Kubernetes needs (go mod tidy)" env GOFLAGS=-mod=mod go mod tidy
		local i=0
		for c in "${cmds[@]}"; do
			i=$((i + 1))
			timed "go build $c ($i of ${#cmds[@]})" env CGO_ENABLED=0 GOFLAGS=-mod=mod \
				go build -trimpath -ldflags='-s -w' -o "$BIN/$c.new" "k8s.io/kubernetes/cmd/$c"
			mv "$BIN/$c.new" "$BIN/$c"
		done
	)
	log "Kubernetes $VERSION built in $(elapsed "$all")"
}

# build_netpol compiles kube-router (its firewall enforces NetworkPolicy) once per version, with
# `go install` from the module proxy (its go.mod has no replace directives).
build_netpol() {
	[ -x "$NETPOL" ] && return
	local dir
	dir=$(dirname "$NETPOL")
	mkdir -p "$dir"
	log "building kube-router $NETPOL_VERSION into $dir (once per machine; 3 to 10 minutes)"
	timed "go install kube-router $NETPOL_VERSION" env CGO_ENABLED=0 GOBIN="$dir/.build" GOFLAGS=-mod=mod \
		go install -trimpath -ldflags='-s -w' "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$NETPOL_VERSION"
	mv "$dir/.build/kube-router" "$NETPOL"
	rmdir "$dir/.build" 2>/dev/null || true
}

# start_netpol starts kube-router's NetworkPolicy firewall (only it: no routes, no service
# proxy, no CNI configuration) under the controller manager's identity. `up` on a running
# cluster starts it when it is missing, so an older cluster gains enforcement without `down`.
start_netpol() {
	keep_docker_bridged
	start network-policy "$NETPOL" --kubeconfig="$DIR/etc/controller.kubeconfig" --hostname-override="$NODE" \
		--run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
		--service-cluster-ip-range=10.96.0.0/24 --health-port=0 --metrics-port=0 --v=1
	wait_for "network-policy firewall" 60 iptables -w -n -L KUBE-ROUTER-FORWARD
	keep_docker_bridged # (a sync that was under way when it was added may have dropped it)
}

# DOCKER_BRIDGED is the rule that keeps traffic between two containers of one Docker network
# accepted while kube-router runs. kube-router's policy sync saves the whole filter table, rebuilds
# its chains and restores the table (iptables-restore without --noflush): a rule Docker adds in
# between, such as the accept between the containers of a network just created, is lost, and the
# FORWARD chain's drop policy then cuts a run's container off from Alfred's container on the
# run's internal network (runner's TestRedTeamEgressDockerContained). The rule accepts only
# frames bridged within one Docker bridge (br-…), what Docker's own accept allows; traffic between
# two networks is routed, not bridged, and stays dropped. A Docker host without kube-router needs
# none of this.
DOCKER_BRIDGED=(-i br-+ -m physdev --physdev-is-bridged -j ACCEPT)

# keep_docker_bridged puts DOCKER_BRIDGED first in Docker's DOCKER-USER chain, once. Without it
# the cluster works; only a Docker network created during a sync may lose its accept rule, so a
# failure is a warning.
keep_docker_bridged() {
	iptables -w -C DOCKER-USER "${DOCKER_BRIDGED[@]}" 2>/dev/null && return
	iptables -w -I DOCKER-USER 1 "${DOCKER_BRIDGED[@]}" ||
		log "warning: no accept of Docker's bridged traffic in DOCKER-USER (is the Docker engine running?): a Docker network created while kube-router syncs may lose its own accept rule (spec/kubernetes.md, \"Docker beside kube-router\")"
}

# stop_netpol stops the firewall and removes what it left in this machine's filter table (its
# chains and the jumps to them, kube-router netpol comments or KUBE-* chain names) and its
# ipsets; the rest of the table (Docker's) is written back as it was.
stop_netpol() {
	stop network-policy
	iptables -w -D DOCKER-USER "${DOCKER_BRIDGED[@]}" 2>/dev/null || true
	command -v iptables-save >/dev/null || return 0
	local rules
	rules=$(iptables-save -t filter)
	# (grep -q on the pipe would end iptables-save early: with pipefail, a failure)
	if grep -qE '^:KUBE-(ROUTER|POD-FW|NWPLCY)' <<<"$rules"; then
		awk '
			/^:KUBE-(ROUTER|POD-FW|NWPLCY)/ { next }
			/^-A KUBE-(ROUTER|POD-FW|NWPLCY)/ { next }
			/-j KUBE-(ROUTER|POD-FW|NWPLCY)/ { next }
			{ print }' <<<"$rules" | iptables-restore -w -T filter
	fi
	if command -v ipset >/dev/null; then
		local s
		for s in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-(SRC|DST)-'); do ipset destroy "$s" 2>/dev/null || true; done
	fi
}

pki() {
	local p=$DIR/pki
	[ -f "$p/ca.crt" ] && return
	mkdir -p "$p"
	(
		cd "$p"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj /CN=alfred-test-cluster-ca 2>/dev/null
		cert() { # name subject [extfile]
			openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 30 ${3:+-extfile "$3"} 2>/dev/null
		}
		printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' >san.ext
		cert apiserver /CN=kube-apiserver san.ext
		cert apiserver-kubelet /O=system:masters/CN=kube-apiserver-kubelet-client
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	)
	# Static tokens: the administrator (the tests' client), and the node, the controller manager
	# and the scheduler under their own names so that RBAC and the Node authorizer apply.
	local t
	for t in admin node controller scheduler; do head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$p/$t.token"; done
	{
		echo "$(cat "$p/admin.token"),admin,admin,system:masters"
		echo "$(cat "$p/node.token"),system:node:$NODE,node,system:nodes"
		# The controller manager runs every controller under one identity (no per-controller
		# service accounts): a test cluster gives it all rights rather than each controller's role.
		echo "$(cat "$p/controller.token"),system:kube-controller-manager,controller,system:masters"
		echo "$(cat "$p/scheduler.token"),system:kube-scheduler,scheduler"
	} >"$p/tokens.csv"
	chmod 600 "$p"/*.key "$p"/*.token "$p/tokens.csv"
}

kubeconfig() { # file token
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: alfred-test
  cluster: {server: "https://127.0.0.1:16443", certificate-authority: "$DIR/pki/ca.crt"}
users:
- name: user
  user: {tokenFile: "$2"}
contexts:
- name: alfred-test
  context: {cluster: alfred-test, user: user}
current-context: alfred-test
EOF
}

configs() {
	mkdir -p "$DIR/etc" "$DIR/run" "$DIR/log" "$DIR/cni"
	kubeconfig "$DIR/etc/admin.kubeconfig" "$DIR/pki/admin.token"
	kubeconfig "$DIR/etc/node.kubeconfig" "$DIR/pki/node.token"
	kubeconfig "$DIR/etc/controller.kubeconfig" "$DIR/pki/controller.token"
	kubeconfig "$DIR/etc/scheduler.kubeconfig" "$DIR/pki/scheduler.token"
	cat >"$DIR/etc/containerd.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni"
EOF
	cat >"$DIR/cni/10-alfred-test.conflist" <<'EOF'
{"cniVersion": "0.4.0", "name": "alfred-test", "plugins": [
 {"type": "bridge", "bridge": "alfredk8s0", "isGateway": true, "ipMasq": true,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
 {"type": "portmap", "capabilities": {"portMappings": true}},
 {"type": "loopback"}]}
EOF
	cat >"$DIR/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$DIR/pki/ca.crt"}
authorization: {mode: AlwaysAllow}
address: 127.0.0.1
port: 10350
healthzBindAddress: 127.0.0.1
healthzPort: 10348
readOnlyPort: 0
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: "unix://$SOCK"
clusterDomain: cluster.local
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
containerLogMaxSize: 1Mi
containerLogMaxFiles: 2
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
EOF
}

# start runs a daemon in the background with its log and pid file; it survives this script.
start() { # name command...
	local name=$1
	shift
	if running "$name"; then return; fi
	setsid "$@" >"$DIR/log/$name.log" 2>&1 </dev/null &
	echo $! >"$DIR/run/$name.pid"
}

wait_for() { # what seconds command...
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 5; i++)); do
		if "$@" >/dev/null 2>&1; then return; fi
		sleep 0.2
	done
	die "$what not ready after ${secs}s; logs in $DIR/log"
}

pause_image() {
	kctr images ls -q | grep -qx "$PAUSE" && return
	local b
	b=$(mktemp -d)
	cat >"$b/main.go" <<'EOF'
// The sandbox process of every pod: waits for SIGTERM or SIGINT, then exits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
EOF
	printf 'module pause\n\ngo 1.26\n' >"$b/go.mod"
	(cd "$b" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o pause .)
	printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$b/Dockerfile"
	DOCKER_BUILDKIT=0 docker build -q -t "$PAUSE" "$b" >/dev/null 2>&1
	import "$PAUSE"
	rm -rf "$b"
}

# import loads Docker images into the cluster's containerd and returns once the kubelet can run
# them. containerd's CRI plugin, which the kubelet asks, learns of an image from containerd's
# event stream in its own time, after `ctr images import` returns (measured on the 2-core test
# machine: milliseconds idle, up to a quarter of a second during the test suite, and a stream
# that also carries every container's exit can fall further behind); until it has, the kubelet
# finds the image absent and a Pod's container waits in ErrImageNeverPull. The plugin labels
# each image it has taken in io.cri-containerd.image=managed as it adds the name to the index
# the kubelet reads.
import() {
	local img ref
	for img in "$@"; do
		docker save "$img" | kctr images import - >/dev/null
		ref=$(fullref "$img")
		wait_for "the image $ref in the kubelet's view (the CRI plugin's label)" 300 cri_managed "$ref"
	done
}

# kctr is ctr on the cluster's containerd, in the namespace the kubelet's containers and images
# live in.
kctr() { ctr --address "$SOCK" -n k8s.io "$@"; }

# cri_managed succeeds when containerd's CRI plugin has taken in the image REF.
cri_managed() {
	kctr images ls -q "name==$1,labels.\"io.cri-containerd.image\"==managed" | grep -qxF "$1"
}

# fullref prints the reference containerd keeps for an image name: docker.io/library/NAME,
# docker.io/OWNER/NAME, or the name as given when it starts with a registry host.
fullref() {
	local img=$1
	if [[ $img != */* ]]; then
		echo "docker.io/library/$img"
	elif [[ ${img%%/*} != *.* && ${img%%/*} != *:* && ${img%%/*} != localhost ]]; then
		echo "docker.io/$img"
	else
		echo "$img"
	fi
}

# running reports whether the cluster's daemon NAME runs: its pid file names a process that is
# not a zombie (a killed daemon stays one until the machine's init reaps it).
running() {
	local pid state
	[ -f "$DIR/run/$1.pid" ] || return 1
	pid=$(cat "$DIR/run/$1.pid")
	state=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
	[[ $state != Z* ]]
}

# forget removes images from the cluster's containerd, by the full reference containerd keeps
# (fullref), and the image id reference (sha256:…) the CRI plugin adds, unless another name
# still points at the same image.
forget() {
	local img ref digest id
	for img in "$@"; do
		ref=$(fullref "$img")
		digest=$(kctr images ls | awk -v r="$ref" '$1 == r { print $3 }')
		[ -n "$digest" ] || continue
		kctr images rm "$ref" >/dev/null
		if ! kctr images ls | awk -v d="$digest" '$3 == d && $1 !~ /^sha256:/' | grep -q .; then
			for id in $(kctr images ls | awk -v d="$digest" '$3 == d && $1 ~ /^sha256:/ { print $1 }'); do
				kctr images rm "$id" >/dev/null
			done
		fi
	done
}

up() {
	packages
	build
	build_netpol
	# A cluster whose processes were ended without `down` (a stopped session, a reboot) left
	# state, mounts and a bridge: start afresh rather than on top of them.
	if [ -d "$DIR" ] && ! running kube-apiserver; then
		log "the cluster in $DIR is not running: removing its state first"
		down
	fi
	pki
	configs
	start etcd etcd --name alfred-test --data-dir "$DIR/etcd" \
		--listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
		--listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
		--initial-cluster alfred-test=http://127.0.0.1:23800
	start kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:23790 \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=16443 \
		--tls-cert-file="$DIR/pki/apiserver.crt" --tls-private-key-file="$DIR/pki/apiserver.key" \
		--client-ca-file="$DIR/pki/ca.crt" --token-auth-file="$DIR/pki/tokens.csv" \
		--authorization-mode=Node,RBAC --allow-privileged=false \
		--kubelet-client-certificate="$DIR/pki/apiserver-kubelet.crt" \
		--kubelet-client-key="$DIR/pki/apiserver-kubelet.key" --kubelet-preferred-address-types=Hostname \
		--service-account-key-file="$DIR/pki/sa.pub" --service-account-signing-key-file="$DIR/pki/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.96.0.0/24
	wait_for kube-apiserver 60 "${KUBECTL[@]}" get --raw /readyz
	start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$DIR/etc/controller.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port=10357 --leader-elect=false \
		--service-account-private-key-file="$DIR/pki/sa.key" --root-ca-file="$DIR/pki/ca.crt" \
		--use-service-account-credentials=false --controllers='*,-nodeipam,-cloud-node-lifecycle'
	start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$DIR/etc/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port=10359 --leader-elect=false
	start containerd containerd --config "$DIR/etc/containerd.toml"
	wait_for containerd 30 ctr --address "$SOCK" version
	pause_image
	start kubelet "$BIN/kubelet" --config="$DIR/etc/kubelet.yaml" --kubeconfig="$DIR/etc/node.kubeconfig" \
		--hostname-override="$NODE" --root-dir="$DIR/kubelet" --cert-dir="$DIR/kubelet/pki"
	wait_for "node $NODE" 90 "${KUBECTL[@]}" wait --for=condition=Ready "node/$NODE" --timeout=1s
	start_netpol
	wait_for "default service account" 60 "${KUBECTL[@]}" get serviceaccount default
	log "ready: KUBECONFIG=$DIR/etc/admin.kubeconfig"
	echo "$DIR/etc/admin.kubeconfig"
}

stop() { # name
	local f=$DIR/run/$1.pid pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$f"
}

down() {
	[ -d "$DIR" ] || return 0
	if running kube-apiserver; then
		"${KUBECTL[@]}" delete pods --all --all-namespaces --grace-period=0 --force --timeout=30s >/dev/null 2>&1 || true
	fi
	stop kubelet
	stop_netpol
	if running containerd; then
		local id
		for id in $(kctr tasks ls -q 2>/dev/null); do
			kctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
			kctr tasks delete -f "$id" >/dev/null 2>&1 || true
		done
	fi
	stop containerd
	# containerd's shims outlive it, and the containers their shims: end those of this cluster
	# only (its shims name its socket; its containers are in the kubelet's kubepods cgroups).
	pkill -9 -f "containerd-shim.*-address $SOCK" 2>/dev/null || true
	if [ -d /sys/fs/cgroup/pids/kubepods ]; then
		find /sys/fs/cgroup/pids/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
	fi
	stop kube-scheduler
	stop kube-controller-manager
	stop kube-apiserver
	stop etcd
	{ grep -o " $DIR[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	ip link delete alfredk8s0 2>/dev/null || true
	rm -rf "$DIR"
	log "stopped; $DIR removed"
}

# report prints, for a test that failed with images it imported, what the cluster knows of
# each: containerd's record of the name and its labels (absent: removed, or never imported),
# the image events containerd's CRI plugin handled for it and what failed there, and the
# kubelet's image garbage collection and evictions, which remove unused images.
report() {
	local img ref
	for img in "$@"; do
		ref=$(fullref "$img")
		echo "== $ref"
		echo "containerd: $(kctr images ls "name==$ref" 2>&1 | awk 'NR > 1 { print $3, $NF }' | grep . || echo "no such image")"
		grep -F "$ref" "$DIR/log/containerd.log" 2>/dev/null | grep -E 'Image(Create|Update|Delete) event|level=(error|warning)' | tail -n 8 | cut -c1-400 || true
	done
	echo "== kubelet: image garbage collection and evictions"
	grep -E 'image_gc_manager|Eviction manager: (attempting|must evict)|Disk usage on image' "$DIR/log/kubelet.log" 2>/dev/null | tail -n 8 | cut -c1-400 || true
}

case "${1:-}" in
up) up ;;
down) down ;;
import)
	shift
	import "$@"
	;;
forget)
	shift
	forget "$@"
	;;
report)
	shift
	report "$@"
	;;
env) echo "KUBECONFIG=$DIR/etc/admin.kubeconfig" ;;
*) die "usage: $0 up|down|import IMAGE...|forget IMAGE...|report IMAGE...|env" ;;
esac
