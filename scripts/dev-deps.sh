#!/usr/bin/env bash
# Installs and starts what `make test` needs on Debian 12: git, make, PostgreSQL (role alfred,
# password alfred, superuser; databases alfred and alfred_test) and a Docker engine.
# Idempotent: what is already installed or running is left alone. Run as root (or with sudo).
#
#   ALFRED_DEPS_SKIP_POSTGRES=1 do not install or start PostgreSQL (`make run` with the embedded
#                               SQLite store needs none)
#   ALFRED_DEPS_SKIP_DOCKER=1   do not install or start Docker
#   ALFRED_DEPS_LOG_DIR=DIR     where dockerd logs when this script starts it (default /tmp)
set -euo pipefail

log() { printf 'dev-deps: %s\n' "$*" >&2; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { log "run as root or install sudo"; exit 1; }
	SUDO=(sudo)
fi

# as_postgres runs a command as the postgres system user, from a directory it can read.
as_postgres() { (cd / && "${SUDO[@]}" runuser -u postgres -- "$@"); }

pg_installed() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && command -v pg_ctlcluster >/dev/null; }

# --- packages ---------------------------------------------------------------------------
missing=()
command -v git >/dev/null || missing+=(git)
command -v make >/dev/null || missing+=(make)
if [ "${ALFRED_DEPS_SKIP_POSTGRES:-}" != 1 ]; then
	pg_installed || missing+=(postgresql)
fi
if [ "${ALFRED_DEPS_SKIP_DOCKER:-}" != 1 ] && ! command -v dockerd >/dev/null; then
	missing+=(docker.io)
fi
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	"${SUDO[@]}" apt-get update
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

# --- PostgreSQL -------------------------------------------------------------------------
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

	as_postgres psql -p "$port" -v ON_ERROR_STOP=1 -q <<'SQL'
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'alfred') THEN
		CREATE ROLE alfred LOGIN SUPERUSER PASSWORD 'alfred';
	END IF;
END
$$;
SQL
	for db in alfred alfred_test; do
		if [ "$(as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
			log "creating database $db"
			as_postgres createdb -p "$port" -O alfred "$db"
		fi
	done
	log "PostgreSQL $major ready: postgres://alfred:alfred@127.0.0.1:$port/alfred_test"
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
