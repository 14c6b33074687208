#!/usr/bin/env bash
# A throwaway Forgejo on this machine to try Alfred with, for whoever has no forge of their own
# (docs/forges.md, "No forge? A throwaway Forgejo"). It matches deploy/demo/alfred.yaml: Forgejo at
# http://127.0.0.1:3000, the bot account "bot", Alfred's webhook at
# http://127.0.0.1:8080/webhooks/forgejo.
#
#   bash scripts/try-forgejo.sh         start, then setup
#   bash scripts/try-forgejo.sh start   run the official image (codeberg.org/forgejo/forgejo) in
#                                       Docker on the host's network, wait for it, create the
#                                       administrator with `forgejo admin user create --admin`
#   bash scripts/try-forgejo.sh setup   through the API of a running, fresh Forgejo: create the
#                                       bot account and its access token (written to
#                                       forgejo.token), a repository of the administrator with
#                                       the bot as admin collaborator, and its webhook to Alfred
#                                       with the secret of webhook.secret
#   bash scripts/try-forgejo.sh stop    remove the container and its data
#
# Run `make run` once before (it creates alfred.yaml and webhook.secret, then plays the demo:
# stop it with Ctrl-C), this script, then `make run` again. It starts Docker first when it is
# not running (scripts/dev-deps.sh). The environment can change the defaults:
#   ALFRED_TRY_URL       Forgejo's URL (http://127.0.0.1:3000, the demo's base_url)
#   ALFRED_TRY_ADMIN     the administrator, owner of the repository: you (alice)
#   ALFRED_TRY_BOT       the bot account (bot, the demo's bot_user)
#   ALFRED_TRY_REPO      the repository's name (sandbox)
#   ALFRED_TRY_HOOK_URL  the webhook's URL (http://127.0.0.1:8080/webhooks/forgejo)
#   ALFRED_TRY_DIR       where webhook.secret is read and forgejo.token and forgejo-try.admin
#                        (the administrator's password) are written (the repository's root)
#   ALFRED_TRY_IMAGE     the image (codeberg.org/forgejo/forgejo:11-rootless)
set -euo pipefail
cd "$(dirname "$0")/.."

url=${ALFRED_TRY_URL:-http://127.0.0.1:3000}
url=${url%/}
admin=${ALFRED_TRY_ADMIN:-alice}
bot=${ALFRED_TRY_BOT:-bot}
repo=${ALFRED_TRY_REPO:-sandbox}
hook_url=${ALFRED_TRY_HOOK_URL:-http://127.0.0.1:8080/webhooks/forgejo}
dir=${ALFRED_TRY_DIR:-.}
image=${ALFRED_TRY_IMAGE:-codeberg.org/forgejo/forgejo:11-rootless}
container=alfred-try-forgejo
admin_file=$dir/forgejo-try.admin

say() { printf 'try-forgejo: %s\n' "$*" >&2; }
die() { say "$1"; [ -z "${2:-}" ] || say "fix: $2"; exit 1; }
random() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }
# str S prints S as a JSON string.
str() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }

# api METHOD PATH USER PASSWORD WANT [JSON]: calls Forgejo's API with Basic credentials, prints
# the answer's body, and fails unless the status is WANT. The credentials and the body (which
# may hold a password or the webhook secret) reach curl in files of a private directory, never
# in its arguments, which every local user can read (ps, /proc/PID/cmdline).
api() {
	local method=$1 path=$2 user=$3 pass=$4 want=$5 data=${6:-} tmp cred status
	tmp=$(mktemp -d)
	cred=$user:$pass
	cred=${cred//\\/\\\\}
	cred=${cred//\"/\\\"}
	printf 'user = "%s"\n' "$cred" >"$tmp/config"
	local args=(-sS -K "$tmp/config" -o "$tmp/out" -w '%{http_code}' -X "$method" -H 'Accept: application/json')
	if [ -n "$data" ]; then
		printf '%s' "$data" >"$tmp/body"
		args+=(-H 'Content-Type: application/json' --data-binary "@$tmp/body")
	fi
	status=$(curl "${args[@]}" "$url/api/v1$path") || { rm -rf "$tmp"; die "$method $path: Forgejo at $url does not answer" "start it: bash scripts/try-forgejo.sh start"; }
	if [ "$status" != "$want" ]; then
		say "$method $path answered $status: $(cat "$tmp/out")"
		rm -rf "$tmp"
		return 1
	fi
	cat "$tmp/out"
	rm -rf "$tmp"
}

start() {
	# Docker first: on a fresh machine nothing has started it yet (make run stops before it
	# does when no forge is configured). dev-deps.sh installs and starts it, and nothing else.
	if ! docker info >/dev/null 2>&1; then
		say "the Docker engine is not running: starting it (scripts/dev-deps.sh)"
		ALFRED_DEPS_SKIP_POSTGRES=1 ALFRED_DEPS_SKIP_BROWSER=1 bash scripts/dev-deps.sh ||
			die "scripts/dev-deps.sh could not start Docker (above: its reason)" "fix what it says, then bash scripts/try-forgejo.sh again"
	fi
	docker info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info fails)" \
		"see /tmp/alfred-dockerd.log, or start dockerd yourself"
	command -v curl >/dev/null || die "curl is not installed" "apt-get install curl (with sudo when not root)"
	if docker container inspect "$container" >/dev/null 2>&1; then
		die "the container $container exists already" "bash scripts/try-forgejo.sh stop, then start again"
	fi
	if ! docker image inspect "$image" >/dev/null 2>&1; then
		say "pulling $image (not on this machine yet)"
		docker pull -q "$image" >/dev/null ||
			die "$image is not on this machine and could not be pulled (above: docker's reason; no registry reachable?)" \
				"pull it where a registry is reachable and bring it here (docker save | docker load), or set ALFRED_TRY_IMAGE to an image you have; without any forge, make run plays Alfred's demo on a stand-in forge instead"
	fi
	local port=${url##*:}
	say "starting $image as $container (host network, $url)"
	# The host's network: Forgejo reaches Alfred at 127.0.0.1:8080 and Alfred reaches Forgejo at
	# 127.0.0.1:3000 (the agent containers do not: git runs on Alfred's side). Webhooks to
	# a loopback address are refused unless allowed.
	docker run -d --name "$container" --network host \
		-e FORGEJO__security__INSTALL_LOCK=true \
		-e FORGEJO__server__ROOT_URL="$url/" \
		-e FORGEJO__server__HTTP_ADDR=127.0.0.1 \
		-e FORGEJO__server__HTTP_PORT="$port" \
		-e FORGEJO__server__DISABLE_SSH=true \
		-e FORGEJO__database__DB_TYPE=sqlite3 \
		-e FORGEJO__webhook__ALLOWED_HOST_LIST=loopback \
		-e FORGEJO__service__DISABLE_REGISTRATION=true \
		"$image" >/dev/null ||
		die "docker could not run $image (above: docker's reason)" \
			"docker rm -f $container, then bash scripts/try-forgejo.sh again"
	for _ in $(seq 120); do
		curl -sf "$url/api/v1/version" >/dev/null && break
		sleep 1
	done
	curl -sf "$url/api/v1/version" >/dev/null || die "Forgejo did not answer at $url within 120 s" "docker logs $container"
	local pass
	pass=$(random 12)
	docker exec "$container" forgejo admin user create --admin --username "$admin" --password "$pass" \
		--email "$admin@example.org" --must-change-password=false >/dev/null ||
		die "could not create the administrator $admin" "docker logs $container; then bash scripts/try-forgejo.sh stop and start again"
	(umask 077 && printf '%s\n' "$pass" >"$admin_file")
	say "Forgejo $(curl -sf "$url/api/v1/version") is up; administrator $admin, password in $admin_file"
}

setup() {
	local pass bot_pass token secret
	command -v curl >/dev/null || die "curl is not installed" "apt-get install curl (with sudo when not root)"
	[ -s "$admin_file" ] || die "no $admin_file (the password of $admin)" "bash scripts/try-forgejo.sh start"
	pass=$(head -n 1 "$admin_file")
	[ -s "$dir/webhook.secret" ] || die "no $dir/webhook.secret" "make run once: it creates alfred.yaml and webhook.secret"
	secret=$(head -n 1 "$dir/webhook.secret")

	bot_pass=$(random 12)
	api POST /admin/users "$admin" "$pass" 201 "{\"username\": $(str "$bot"), \"email\": $(str "$bot@example.org"),
		\"password\": $(str "$bot_pass"), \"must_change_password\": false}" >/dev/null ||
		die "cannot create the bot account $bot" "this sets up a fresh Forgejo: bash scripts/try-forgejo.sh stop, then bash scripts/try-forgejo.sh"
	say "created the bot account $bot"
	# A token is created with the account's own password; the scopes are what Alfred uses.
	token=$(api POST "/users/$bot/tokens" "$bot" "$bot_pass" 201 "{\"name\": $(str "alfred-$(date +%s)"),
		\"scopes\": [\"write:issue\", \"write:repository\", \"read:user\", \"read:organization\"]}" |
		sed -n 's/.*"sha1":"\([0-9A-Za-z_]*\)".*/\1/p')
	[ -n "$token" ] || die "Forgejo returned no token for $bot"
	(umask 077 && printf '%s\n' "$token" >"$dir/forgejo.token")
	say "wrote $dir/forgejo.token (the bot's API token)"
	api POST /user/repos "$admin" "$pass" 201 "{\"name\": $(str "$repo"), \"auto_init\": true,
		\"default_branch\": \"main\", \"description\": \"Trying Alfred\"}" >/dev/null
	say "created the repository $admin/$repo"
	# Admin: Forgejo shows collaborators' permissions and webhooks only to a repository's admins.
	api PUT "/repos/$admin/$repo/collaborators/$bot" "$admin" "$pass" 204 '{"permission": "admin"}' >/dev/null
	say "$bot is an admin collaborator of $admin/$repo"
	api POST "/repos/$admin/$repo/hooks" "$admin" "$pass" 201 "{\"type\": \"forgejo\", \"active\": true,
		\"branch_filter\": \"*\",
		\"config\": {\"url\": $(str "$hook_url"), \"content_type\": \"json\", \"secret\": $(str "$secret")},
		\"events\": [\"issues\", \"issue_assign\", \"issue_label\", \"issue_comment\", \"pull_request\",
			\"pull_request_assign\", \"pull_request_label\", \"pull_request_sync\", \"pull_request_comment\",
			\"pull_request_review_approved\", \"pull_request_review_rejected\",
			\"pull_request_review_comment\", \"pull_request_review_request\"]}" >/dev/null
	say "created the webhook of $admin/$repo to $hook_url"
	say "next: make run (the doctor checks all this); then sign in at $url as $admin (password in $admin_file),"
	say "      open an issue in $admin/$repo and assign it to $bot"
}

case ${1:-all} in
start) start ;;
setup) setup ;;
# Not "start && setup": bash ignores set -e inside a function run on the left of &&.
all)
	start
	setup
	;;
stop)
	docker rm -f -v "$container" >/dev/null 2>&1 || true
	rm -f "$admin_file"
	say "removed $container and its data"
	;;
*) die "usage: bash scripts/try-forgejo.sh [start|setup|stop]" ;;
esac
