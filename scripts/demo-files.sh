#!/usr/bin/env bash
# Prepares `make run`: copies deploy/demo/alfred.yaml to ./alfred.yaml when there is none,
# creates the secrets Alfred can make itself (the webhook secret and the token of the operator
# pages, random, mode 600) and says exactly which file only you can create (the bot's API
# token). Leaves every existing file alone. Exits 3 while no forge is configured (no forges
# entry, or its token file missing): make run then plays the demo on a stand-in forge
# (alfred demo) instead of serving.
#
#   CONFIG=FILE   the configuration (default alfred.yaml); only the demo's files are created
set -euo pipefail
cd "$(dirname "$0")/.."
config=${CONFIG:-alfred.yaml}
say() { printf 'demo: %s\n' "$*" >&2; }
# note keeps a line about a file made here, said after the line that tells what make run does.
notes=()
note() { notes+=("$*"); }
# tell says the notes, each once.
tell() {
	local n
	for n in "${notes[@]}"; do say "$n"; done
	notes=()
}

if [ ! -f "$config" ]; then
	cp deploy/demo/alfred.yaml "$config"
	note "created $config from deploy/demo/alfred.yaml, for your own forge later (a Forgejo/Gitea at http://127.0.0.1:3000, bot user \"bot\"; edit base_url and bot_user if yours differ; git ignores it)"
fi
dir=$(dirname "$config")

# value KEY prints the first "KEY: value" of the configuration, without comments or quotes.
value() { sed -n "s/^[[:space:]-]*$1:[[:space:]]*\([^#[:space:]]*\).*/\1/p" "$config" | head -n 1 | tr -d '"'"'"; }

# path_of FILE is FILE as given in the configuration, relative to the configuration's folder.
path_of() {
	local f=${1#./}
	case $f in /*) ;; *) [ "$dir" = . ] || f=$dir/$f ;; esac
	printf '%s' "$f"
}

random_secret() { # FILE WHAT
	local f
	f=$(path_of "$1")
	if [ ! -s "$f" ]; then
		(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$f" && echo >>"$f")
		note "created $f ($2, random; git ignores it)"
	fi
}

hook=$(value webhook_secret_file)
[ -z "$hook" ] || random_secret "$hook" "the webhook secret: set the same secret on the repository's webhook"
admin=$(sed -n '/^admin:/,/^[^[:space:]]/s/^[[:space:]]*token_file:[[:space:]]*\([^#[:space:]]*\).*/\1/p' "$config" | head -n 1)
[ -z "$admin" ] || random_secret "$admin" "the token of the operator pages at /ui"

# forge_entries counts the entries of the forges: list (a line starting with "-" inside it).
forge_entries() { awk '/^forges:/ { in_f = 1; next } /^[^[:space:]#-]/ { in_f = 0 } in_f && /^[[:space:]]*-/ { n++ } END { print n + 0 }' "$config"; }
if [ "$(forge_entries)" -eq 0 ]; then
	say "no forge configured in $config: playing Alfred's demo on a stand-in forge instead (make demo; docs/demo.md)"
	tell
	exit 3
fi
token=$(value token_file)
if [ -n "$token" ]; then
	token=$(path_of "$token")
	if [ ! -s "$token" ]; then
		say "no forge yet ($token is missing): playing Alfred's demo on a stand-in forge instead (make demo; docs/demo.md)."
		tell
		say "Later, to use your own forge, create $token, the API token of the bot user $(value bot_user) on $(value base_url) (docs/forges.md says how; bash scripts/try-forgejo.sh starts a Forgejo and writes it)."
		exit 3
	fi
fi
tell
say "secret files present; the webhook secret is in ${hook:-(none)}"
