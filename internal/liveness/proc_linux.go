package liveness

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
)

// On Linux a process's start time is in clock ticks after boot (field 22
// of /proc/<pid>/stat), and the boot is named by
// /proc/sys/kernel/random/boot_id.

// Stat reads pid's start time and whether it is a zombie.
func Stat(pid int) (start uint64, zombie bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// The command name, in parentheses, may hold anything but ends at
	// the last ")"; the state is the first field after it, starttime the
	// 20th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 20 {
		return 0, false, errors.New("short stat line")
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0] == "Z", err
}

// bootID reads the name of the running boot.
func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}
