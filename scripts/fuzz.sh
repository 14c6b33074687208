#!/usr/bin/env bash
# Runs fuzz targets, each for FUZZTIME (a duration, or a count such as 500x), JOBS packages at a
# time: `make fuzz` and the end of `make test`.
#
#   bash scripts/fuzz.sh FUZZTIME JOBS PKG:FuzzName...
#
# Each package's fuzzing test binary (instrumented for coverage, every dependency with it) is
# linked once, `go test -c -fuzz`, and its targets are run one after another by that binary as
# `go test -fuzz` runs it: from the package's directory (its testdata/fuzz corpus, where a
# failing input is written), with the build cache's fuzz directory as its cache. `go test -fuzz`
# takes one target a call and links the binary again for each: mailbox and webhook have three.
# Prints one line a target, "fuzz PKG FuzzName (FUZZTIME): ok" or "FAILED" and its output; exits
# non-zero if any failed.
#
#   GO  the go command (default go)
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 FUZZTIME JOBS PKG:FuzzName..." >&2; exit 2; }
FUZZTIME=$1 JOBS=$2
shift 2
GO=${GO:-go}
GOCACHE=$("$GO" env GOCACHE)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# package PKG FuzzName...: link PKG's fuzzing binary, then run each target with it.
package() {
	local pkg=$1 dir importpath bin out fn failed=0
	shift
	read -r dir importpath < <("$GO" list -f '{{.Dir}} {{.ImportPath}}' "$pkg")
	bin=$tmp/${importpath//\//_}.test
	if ! out=$("$GO" test -c -fuzz . -ldflags=-w -o "$bin" "$pkg" 2>&1); then
		echo "fuzz $pkg: FAILED to build"
		echo "$out"
		return 1
	fi
	for fn in "$@"; do
		if out=$(cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^$fn\$" -test.fuzztime "$FUZZTIME" \
			-test.fuzzcachedir "$GOCACHE/fuzz/$importpath" -test.paniconexit0 2>&1); then
			echo "fuzz $pkg $fn ($FUZZTIME): ok"
		else
			echo "fuzz $pkg $fn ($FUZZTIME): FAILED"
			echo "$out"
			failed=1
		fi
	done
	return $failed
}
export -f package
export GO GOCACHE FUZZTIME tmp

# One line a package: "PKG FuzzA FuzzB", in the order the targets were given.
declare -A fns
order=()
for t in "$@"; do
	pkg=${t%%:*} fn=${t#*:}
	[ -n "${fns[$pkg]+set}" ] || order+=("$pkg")
	fns[$pkg]+=" $fn"
done
for pkg in "${order[@]}"; do
	echo "$pkg${fns[$pkg]}"
done | xargs -P "$JOBS" -L 1 bash -c 'package "$@"' _
