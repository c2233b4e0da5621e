#!/bin/sh
# stress.sh LOAD CMD...: run CMD while LOAD busy loops keep every CPU
# occupied, so a test that passes only on an idle machine fails here.
# The loops are this script's children and end with it, however it ends.
set -eu
load=$1
shift
pids=""
stop() {
	[ -z "$pids" ] || kill $pids 2>/dev/null || true
	pids=""
}
trap stop EXIT
trap 'stop; exit 130' INT TERM
i=0
while [ "$i" -lt "$load" ]; do
	sh -c 'while :; do :; done' &
	pids="$pids $!"
	i=$((i + 1))
done
echo "stress: $load busy loops running; $*" >&2
"$@"
