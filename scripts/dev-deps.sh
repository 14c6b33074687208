#!/usr/bin/env bash
# Checks the prerequisites of `make run` and `make test` on Debian 12 and installs and starts
# the rest: git, make, PostgreSQL (role alfred, password alfred-dev-7Kq2vN9x, superuser;
# databases alfred and alfred_test), a Docker engine and Chromium (the page tests' headless
# browser). Idempotent: what is already installed or running is left alone, except the role's
# password, set on every run (a role made by an older version of this script had the password
# "alfred", a word Alfred refuses as a secret: spec/edge.md).
#
# Prerequisites it checks but does not install, each with its fix when missing:
#   - root, or sudo for this user (packages and services);
#   - Go at the version of go.mod's `go` line or newer, on PATH or in /usr/local/go/bin.
#
#   ALFRED_DEPS_SKIP_POSTGRES=1  do not install or start PostgreSQL (`make run` with the embedded
#                                SQLite store needs none)
#   ALFRED_DEPS_SKIP_DOCKER=1    do not install or start Docker
#   ALFRED_DEPS_SKIP_BROWSER=1   do not install Chromium (the page tests then skip, or fail in CI)
#   ALFRED_DEPS_LOG_DIR=DIR      where dockerd logs when this script starts it (default /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'dev-deps: %s\n' "$*" >&2; }
die() { log "$1"; [ -z "${2:-}" ] || log "fix: $2"; exit 1; }

# --- prerequisites ----------------------------------------------------------------------
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || die "not root and no sudo: packages and services need one of them" \
		"run as root (su -), or install sudo and add $(id -un) to the sudo group (usermod -aG sudo $(id -un))"
	sudo -n true 2>/dev/null || log "sudo will ask for your password"
	SUDO=(sudo)
fi
[ -r /etc/debian_version ] || log "warning: not Debian; the package names below are Debian 12's"

want_go=$(awk '$1 == "go" { print $2; exit }' go.mod)
go_bin=$(command -v go || true)
[ -n "$go_bin" ] || [ ! -x /usr/local/go/bin/go ] || go_bin=/usr/local/go/bin/go
[ -n "$go_bin" ] || die "Go is not installed (Alfred needs Go $want_go or newer)" \
	"install Go $want_go or newer from https://go.dev/dl/ into /usr/local/go and add /usr/local/go/bin to PATH (Debian's golang package is too old)"
have_go=$("$go_bin" env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -n 1)" != "$want_go" ]; then
	# go.mod's toolchain line lets a newer go download the right one, but only online.
	die "Go $have_go at $go_bin is older than go.mod's go $want_go" \
		"install Go $want_go or newer from https://go.dev/dl/ into /usr/local/go and put /usr/local/go/bin first on PATH"
fi
case ":$PATH:" in
*":$(dirname "$go_bin"):"*) ;;
*) log "warning: $go_bin is not on PATH; add $(dirname "$go_bin") to PATH (make uses plain \`go\`)" ;;
esac
log "Go $have_go ($go_bin)"

# as_postgres runs a command as the postgres system user, from a directory it can read.
as_postgres() { (cd / && "${SUDO[@]}" runuser -u postgres -- "$@"); }

pg_installed() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && command -v pg_ctlcluster >/dev/null; }

# --- packages ---------------------------------------------------------------------------
# Each group says what it installs and why before apt runs. Nothing else is upgraded: no
# `apt-get upgrade`, and --no-upgrade leaves what is installed at its version. apt may still
# have to upgrade an installed package a new one depends on at a newer version (libsystemd0,
# say): those are named first, from apt's simulation.
groups=()
group() { # WHY PACKAGE...: a group to install
	local why=$1
	shift
	if [ $# -gt 0 ]; then groups+=("$why|$*"); fi
}
tools=()
command -v git >/dev/null || tools+=(git)
command -v make >/dev/null || tools+=(make)
group "the build and the agents' worktrees" "${tools[@]}"
if [ "${ALFRED_DEPS_SKIP_POSTGRES:-}" != 1 ]; then
	pg_installed || group "the tests' database, and the store when database_url names PostgreSQL" postgresql
fi
if [ "${ALFRED_DEPS_SKIP_DOCKER:-}" != 1 ] && ! command -v dockerd >/dev/null; then
	group "the Docker engine: each agent run is a disposable container" docker.io
fi
if [ "${ALFRED_DEPS_SKIP_BROWSER:-}" != 1 ] && ! command -v chromium >/dev/null; then
	group "the headless browser of the web pages' tests" chromium
fi
if [ ${#groups[@]} -gt 0 ]; then
	log "refreshing the package lists (apt-get update)"
	"${SUDO[@]}" apt-get update -q >/dev/null
	for g in "${groups[@]}"; do
		why=${g%%|*}
		read -r -a pkgs <<<"${g#*|}"
		log "installing ${pkgs[*]}: $why"
		upgrades=$("${SUDO[@]}" apt-get install -s --no-upgrade "${pkgs[@]}" 2>/dev/null |
			sed -n 's/^Inst \([^ ]*\) \[\([^]]*\)\] (\([^ ]*\).*/\1 \2→\3/p' | tr '\n' ' ')
		[ -z "$upgrades" ] || log "  apt must also upgrade, as dependencies of these: $upgrades"
		"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-upgrade "${pkgs[@]}" >/dev/null
	done
fi

# --- PostgreSQL -------------------------------------------------------------------------
# The development role and its password (the Makefile's ALFRED_TEST_DATABASE_URL). Long and not a
# word: Alfred refuses a secret its censor would confuse with its own texts.
dev_role=alfred
dev_password=alfred-dev-7Kq2vN9x
setup_postgres() {
	major=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
	if ! pg_lsclusters -h | awk -v v="$major" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
		log "creating cluster $major/main"
		"${SUDO[@]}" pg_createcluster "$major" main
	fi
	status=$(pg_lsclusters -h | awk -v v="$major" '$1 == v && $2 == "main" { print $4 }')
	port=$(pg_lsclusters -h | awk -v v="$major" '$1 == v && $2 == "main" { print $3 }')
	if [ "$status" != online ]; then
		log "starting PostgreSQL $major/main"
		"${SUDO[@]}" pg_ctlcluster "$major" main start
	fi
	[ "$port" = 5432 ] || log "warning: cluster $major/main listens on port $port; set ALFRED_TEST_DATABASE_URL"
	for _ in $(seq 60); do
		pg_isready -q -h 127.0.0.1 -p "$port" && break
		sleep 0.5
	done
	pg_isready -h 127.0.0.1 -p "$port" >/dev/null || { log "PostgreSQL is not accepting connections on port $port"; exit 1; }

	# The password is set on every run, so a role an older version created gets it too.
	as_postgres psql -p "$port" -v ON_ERROR_STOP=1 -q <<SQL
DO \$\$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$dev_role') THEN
		CREATE ROLE $dev_role LOGIN SUPERUSER;
	END IF;
END
\$\$;
ALTER ROLE $dev_role LOGIN SUPERUSER PASSWORD '$dev_password';
SQL
	for db in alfred alfred_test; do
		if [ "$(as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
			log "creating database $db"
			as_postgres createdb -p "$port" -O "$dev_role" "$db"
		fi
	done
	log "PostgreSQL $major ready: postgres://$dev_role:$dev_password@127.0.0.1:$port/alfred_test"
}
if [ "${ALFRED_DEPS_SKIP_POSTGRES:-}" = 1 ]; then
	log "skipping PostgreSQL (ALFRED_DEPS_SKIP_POSTGRES=1)"
else
	setup_postgres
fi

# --- Docker -----------------------------------------------------------------------------
if [ "${ALFRED_DEPS_SKIP_DOCKER:-}" = 1 ]; then
	log "skipping Docker (ALFRED_DEPS_SKIP_DOCKER=1)"
	exit 0
fi
if "${SUDO[@]}" docker info >/dev/null 2>&1; then
	log "Docker engine already running"
	exit 0
fi
logfile="${ALFRED_DEPS_LOG_DIR:-/tmp}/alfred-dockerd.log"
log "starting dockerd (log: $logfile)"
# Detached from this script's terminal and pipes, so a caller that waits for our output to
# close (CI) does not wait for dockerd too.
"${SUDO[@]}" setsid nohup dockerd </dev/null >"$logfile" 2>&1 &
for _ in $(seq 60); do
	if "${SUDO[@]}" docker info >/dev/null 2>&1; then
		log "Docker engine ready"
		exit 0
	fi
	sleep 1
done
log "dockerd did not become ready within 60s; last lines of $logfile:"
tail -n 30 "$logfile" >&2 || true
exit 1
