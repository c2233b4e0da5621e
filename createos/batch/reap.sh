# Ends what is left of a batch whose helper died before answering: every
# process whose session or process group is one of the given leaders, and
# their descendants, then removes the batch's control directory. Bash and
# /proc only. Arguments: <dir> <leader pid>... Exit 0: done; 1: processes
# survived SIGKILL (counted on stderr); 2: refused, nothing done.
refuse() {
	printf 'batch reap: %s: nothing done\n' "$1" >&2
	exit 2
}
dir=$1
shift
case $dir in /tmp/?*) ;; *) refuse "$dir is not under /tmp/" ;; esac
case $dir/ in */./* | */../* | *//*) refuse "$dir is not a clean path" ;; esac
targets=' '
for p in "$@"; do
	case $p in '' | *[!0-9]* | 0* | 1) refuse "$p is not a leader's pid" ;; esac
	targets+="$p "
done
rp=') '
{ read -r line </proc/$$/stat; } 2>/dev/null || refuse "no /proc"
set -- ${line##*"$rp"}
mysid=$4
# A pipe open at both ends: reading it waits its whole timeout.
exec 3<> <(:)

# scan sets live to the live members, groups to their process groups and
# stopped to 1 when all are stopped. Fields are read after the last ')': a
# command's name may hold any. Nothing of this script's own session is a
# member.
scan() {
	local f p
	ppid=() pgrp=() state=() member=() live=() groups=() stopped=1
	for f in /proc/[0-9]*/stat; do
		{ read -r line <"$f"; } 2>/dev/null || continue
		p=${f#/proc/} p=${p%/stat}
		set -- ${line##*"$rp"}
		[ "$1" = Z ] || [ "$4" = "$mysid" ] && continue
		state[p]=$1 ppid[p]=$2 pgrp[p]=$3
		case $targets in *" $p "* | *" $3 "* | *" $4 "*) member[p]=1 ;; esac
	done
	# Children of members, to a fixpoint.
	local grew=1
	while [ $grew = 1 ]; do
		grew=0
		for p in "${!ppid[@]}"; do
			if [ -z "${member[p]-}" ] && [ -n "${member[${ppid[p]}]-}" ]; then
				member[p]=1 grew=1
			fi
		done
	done
	for p in "${!member[@]}"; do
		live+=("$p")
		case " ${groups[*]} " in *" ${pgrp[p]} "*) ;; *) groups+=("${pgrp[p]}") ;; esac
		case ${state[p]} in T | t) ;; *) stopped=0 ;; esac
	done
}

# Stop the trees first (a stopped process cannot fork, and its children keep
# their link to it), then kill them, round after round.
sig=STOP round=0
while :; do
	scan
	if [ $sig = STOP ] && { [ $stopped = 1 ] || [ $round -ge 10 ]; }; then sig=KILL; fi
	[ $sig = KILL ] && [ ${#live[@]} = 0 ] && break
	[ $round -ge 200 ] && break
	kill -$sig "${live[@]}" 2>/dev/null
	for g in "${groups[@]}"; do
		case $targets in *" $g "*) kill -$sig -- "-$g" 2>/dev/null ;; esac
	done
	round=$((round + 1))
	read -rt 0.01 -u 3
done
rm -rf -- "$dir"
if [ ${#live[@]} != 0 ]; then
	printf 'batch reap: %d processes survived SIGKILL\n' ${#live[@]} >&2
	exit 1
fi
exit 0
