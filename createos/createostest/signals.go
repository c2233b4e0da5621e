package createostest

import (
	"strconv"
	"syscall"
)

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT", syscall.SIGSTOP: "SIGSTOP",
	syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
	syscall.SIGWINCH: "SIGWINCH",
}

// signalName renders a signal as the provider does ("SIGTERM"); unnamed
// signals become "SIG<n>", which still matches ^SIG[A-Z0-9]+$.
func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}

// parseSignal accepts "SIGTERM", "TERM" or a number.
func parseSignal(name string) (syscall.Signal, bool) {
	for s, n := range signalNames {
		if n == name || n == "SIG"+name {
			return s, true
		}
	}
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	return 0, false
}
