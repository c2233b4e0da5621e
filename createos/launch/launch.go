package launch

// Script is the bash program every command runs as (/bin/bash -lc Script), with Data(c) on its
// stdin. It reads the specification, then does what a command line written for c would do:
// `cd -- CWD || exit` when c has a cwd, stdin from /dev/null when c has none, and
// `exec env NAME=VALUE... ARGV...`, so the command's errors, exit codes and environment are
// env's and cd's own. Its variables are shell variables, never exported, so the command does
// not see them; it uses bash builtins and env only, because the sandbox's image is unknown.
// It stays correct under a login profile that sets -e or -u (no ((...)) that can fail, the
// possibly empty environment expanded with ${a[@]+...}), and refuses with status 126 when the
// specification does not arrive whole: a login profile that reads stdin eats it.
const Script = `__pcl_bad() {
	printf '%s\n' "sandbox-plugin: the command's specification did not arrive on stdin (does the login profile read stdin?)" >&2
	exit 126
}
IFS= read -r -d '' __pcl_v || __pcl_bad
[[ $__pcl_v == 'sandbox-plugin launch 1' ]] || __pcl_bad
IFS= read -r -d '' __pcl_cwd || __pcl_bad
IFS= read -r -d '' __pcl_in || __pcl_bad
case $__pcl_in in 0|1) ;; *) __pcl_bad ;; esac
IFS= read -r -d '' __pcl_n || __pcl_bad
case $__pcl_n in ''|*[!0-9]*|0?*) __pcl_bad ;; esac
__pcl_env=()
while [[ ${#__pcl_env[@]} -lt $__pcl_n ]]; do
	IFS= read -r -d '' __pcl_w || __pcl_bad
	__pcl_env+=("$__pcl_w")
done
IFS= read -r -d '' __pcl_n || __pcl_bad
case $__pcl_n in ''|*[!0-9]*|0*) __pcl_bad ;; esac
__pcl_argv=()
while [[ ${#__pcl_argv[@]} -lt $__pcl_n ]]; do
	IFS= read -r -d '' __pcl_w || __pcl_bad
	__pcl_argv+=("$__pcl_w")
done
if [[ -n $__pcl_cwd ]]; then cd -- "$__pcl_cwd" || exit; fi
if [[ $__pcl_in == 0 ]]; then exec </dev/null; fi
exec env ${__pcl_env[@]+"${__pcl_env[@]}"} "${__pcl_argv[@]}"
`

// Command is one command to run.
type Command struct {
	Argv  []string          // the command, then its arguments; Argv[0] != ""
	Cwd   string            // "": the sandbox's default directory
	Env   map[string]string // added to the environment, applied in name order
	Stdin *string           // nil: the command reads /dev/null
}
