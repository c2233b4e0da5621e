package setup

import "strings"

// make chaos holds a run at a known point with files in the tools
// directory (h.RunDir/tools), which both sandboxes see: the fake at its
// host path, createos at SimToolsDir (a read-only mount of the same
// directory, so the harness writes and the sandbox reads). A held command
// runs ChaosHold (in ChaosBinDir), whose command line names the point and
// the row's token, which the flag holds ("chaos-hold execute
// createos-kill-execute"), so the harness finds exactly that row's hold in
// the process tree; it waits until ChaosGo-<token> exists, and only then:
// a held process the host's cleanup does not end is still there for the
// leftover check (no later row's go flag lets it go, and it has no time
// limit of its own below chaosHoldLimit, which is longer than any table).

const (
	ChaosBinDir = "chaos-bin" // in the tools directory: first on every sandbox command's PATH in chaos mode

	// Flags the harness creates (and removes once the hold is seen); each
	// holds the row's token.
	ChaosHoldExecute = "chaos-hold-execute" // the stub agent holds before its work
	ChaosHoldSync    = "chaos-hold-sync"    // tar holds on the workspace upload of a sync-in
	ChaosDaemon      = "chaos-daemon"       // the stub agent leaves a daemon that ignores SIGTERM and a big tree
	ChaosGo          = "chaos-go-"          // + token: the row's held processes go on

	chaosHoldLimit = "36000" // tenths of a second a hold waits at most (an hour), then fails
)

// ChaosHold is chaos-bin/chaos-hold <point> <token>: it waits for
// chaos-go-<token> in the tools directory (its own directory's parent).
const ChaosHold = `#!/bin/sh
tools=$(dirname "$(dirname "$0")")
i=0
while [ ! -e "$tools/` + ChaosGo + `$2" ]; do
	[ $i -ge ` + chaosHoldLimit + ` ] && exit 1
	sleep 0.1
	i=$((i+1))
done
`

// ChaosTar is chaos-bin/tar: with chaos-hold-sync present it holds (with its token) the
// extraction of the workspace upload (the host's post-upload command of
// the workspace sync-in: "tar -xf …/workspace-upload.tar -C …"), then runs
// the real tar.
const ChaosTar = `#!/bin/sh
tools=$(dirname "$(dirname "$0")")
case "$*" in
*workspace-upload.tar*) tok=$(cat "$tools/` + ChaosHoldSync + `" 2>/dev/null) && "$tools/` + ChaosBinDir + `/chaos-hold" sync "$tok" ;;
esac
exec /usr/bin/tar "$@"
`

// chaosPrelude runs in the stub agent after its probes: the execute hold,
// and the daemon of the release fault: a background process that ignores
// SIGTERM (a teardown must SIGKILL it after its grace) and 20000 files
// beside the workspace in the lease root (its removal takes a while), so
// a release has work to do when the worker is killed.
const chaosPrelude = `tools=$(dirname "$0")
if tok=$(cat "$tools/` + ChaosDaemon + `" 2>/dev/null); then
	mkdir -p ../chaos-tree && (cd ../chaos-tree && seq 1 20000 | xargs touch)
	nohup sh -c 'trap "" TERM; exec "$0/` + ChaosBinDir + `/chaos-hold" daemon "$1"' "$tools" "$tok" >/dev/null 2>&1 &
fi
tok=$(cat "$tools/` + ChaosHoldExecute + `" 2>/dev/null) && "$tools/` + ChaosBinDir + `/chaos-hold" execute "$tok"
`

// ChaosStubAgent is the stub agent with the chaos prelude: without the
// flags it is the stub.
var ChaosStubAgent = strings.Replace(StubAgent, "cat >/dev/null\n", "cat >/dev/null\n"+chaosPrelude, 1)
