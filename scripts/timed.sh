#!/usr/bin/env bash
# timed.sh LABEL COMMAND...: runs COMMAND, says every minute on stderr that LABEL is still
# running and, at the end, how long it took; exits with COMMAND's status. make build uses it so
# that a first build (several minutes: about 900 packages) never looks hung.
set -uo pipefail
label=$1
shift
start=$SECONDS
elapsed() { local s=$((SECONDS - start)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
(while sleep 60; do printf '  ... %s: %s so far\n' "$label" "$(elapsed)" >&2; done) &
hb=$!
rc=0
"$@" || rc=$?
kill "$hb" 2>/dev/null
wait "$hb" 2>/dev/null
if [ "$rc" -eq 0 ]; then
	printf '%s: done in %s\n' "$label" "$(elapsed)" >&2
else
	printf '%s: failed after %s\n' "$label" "$(elapsed)" >&2
fi
exit "$rc"
