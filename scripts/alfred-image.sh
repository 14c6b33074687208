#!/usr/bin/env bash
# Alfred's container image without an image registry: a Debian 12 base made here with
# debootstrap (minbase with git and ca-certificates, what `alfred serve` needs of its system),
# imported into Docker, and the static alfred binary added on top. deploy/Dockerfile builds the
# same image from Docker Hub's golang and debian images, which this machine cannot reach; this
# script needs only the Debian package mirror.
#
#   bash scripts/alfred-image.sh [TAG]     build TAG (default alfred:dev) from this checkout;
#                                          prints TAG
#
#   ALFRED_IMAGE_CACHE   where the base's root file system is kept as a tarball between runs
#                        (default /var/cache/alfred-k8s/alfred-base); delete it to rebuild the
#                        base
#   ALFRED_DEBIAN_MIRROR the Debian mirror debootstrap reads (default http://deb.debian.org/debian)
#   ALFRED_BINARY        a static alfred binary (CGO_ENABLED=0) to put in the image instead of
#                        building one from this checkout: the deploy test hands the binary the
#                        other tests run (internal/base/servetest), so that nothing is compiled
#                        twice
#
# A cold build (no tarball) runs debootstrap: 61 to 69 s on this machine's 2
# cores (spec/kubernetes.md, "Alfred's image"); with the tarball cached, only the Go build and
# two small Docker layers. Needs root (debootstrap, chroot), debootstrap (installed from the
# Debian archive when missing), Go and Docker.
set -euo pipefail

TAG=${1:-alfred:dev}
CACHE=${ALFRED_IMAGE_CACHE:-/var/cache/alfred-k8s/alfred-base}
MIRROR=${ALFRED_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
ROOTFS=$CACHE/$SUITE-minbase-git.tar
ROOT=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "alfred-image: [${SECONDS}s] $*" >&2; }

rootfs() {
	[ -s "$ROOTFS" ] && return
	command -v debootstrap >/dev/null || apt-get install -y debootstrap >&2
	mkdir -p "$CACHE"
	local tmp
	tmp=$(mktemp -d "$CACHE/rootfs.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	log "debootstrap $SUITE (minbase, git, ca-certificates) from $MIRROR"
	debootstrap --variant=minbase --include=git,ca-certificates "$SUITE" "$tmp/root" "$MIRROR" >&2
	# The package lists and downloaded archives are not needed at run time.
	rm -rf "$tmp/root/var/lib/apt/lists/"* "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/log/"*
	tar --numeric-owner -C "$tmp/root" -cf "$tmp/rootfs.tar" .
	mv "$tmp/rootfs.tar" "$ROOTFS"
	rm -rf "$tmp"
	trap - EXIT
}

# base imports the tarball as alfred-base:<first 12 hex digits of its sha256>, once.
base() {
	local sum tag
	sum=$(sha256sum "$ROOTFS" | cut -c1-12)
	tag=alfred-base:$SUITE-$sum
	if ! docker image inspect "$tag" >/dev/null 2>&1; then
		log "docker import $ROOTFS as $tag"
		docker import "$ROOTFS" "$tag" >/dev/null
	fi
	echo "$tag"
}

rootfs
BASE=$(base)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
if [ -n "${ALFRED_BINARY:-}" ]; then
	log "the binary $ALFRED_BINARY"
	cp "$ALFRED_BINARY" "$ctx/alfred"
else
	log "go build ./cmd/alfred (static)"
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" \
		-o "$ctx/alfred" ./cmd/alfred)
fi
cp "$ROOT/deploy/alfred.example.yaml" "$ctx/alfred.example.yaml"
# The user is deploy/kubernetes's runner.uid:gid (65532), so that Alfred and the runs' Pods
# share the state claim's files; a Pod's securityContext sets it anyway. HOME is /tmp, the
# writable emptyDir of the Pod (the root file system is read-only).
cat >"$ctx/Dockerfile" <<EOF
FROM $BASE
COPY alfred /usr/local/bin/alfred
COPY alfred.example.yaml /etc/alfred/alfred.example.yaml
USER 65532:65532
ENV HOME=/tmp ALFRED_CONFIG=/etc/alfred/alfred.yaml
WORKDIR /var/lib/alfred
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/alfred"]
CMD ["serve"]
EOF
log "docker build $TAG"
DOCKER_BUILDKIT=0 docker build -q -t "$TAG" "$ctx" >/dev/null 2>&1 || DOCKER_BUILDKIT=0 docker build -t "$TAG" "$ctx" >&2
log "built $TAG"
echo "$TAG"
