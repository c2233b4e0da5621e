package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestStoreFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want driverFlags
		err  string
	}{
		{args: nil, code: -1, want: driverFlags{createosStoreMB: -1}},
		{args: []string{"--createos-store", "/var/cache/x", "--createos-store-mb", "512"}, code: -1, want: driverFlags{createosStore: "/var/cache/x", createosStoreMB: 512}},
		{args: []string{"--createos-store-mb", "0"}, code: -1, want: driverFlags{createosStoreMB: 0}},
		{args: []string{"--createos-store-mb", "-5"}, code: 2, err: "want 0 or more MiB"},
		{args: []string{"--createos-store-mb", "lots"}, code: 2, err: "invalid value"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			o, code := parseArgs(tc.args, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.err) {
				t.Fatalf("code %d, stderr %q; want %d, %q", code, stderr.String(), tc.code, tc.err)
			}
			if code == -1 && o.storeFlags != tc.want {
				t.Fatalf("flags %+v, want %+v", o.storeFlags, tc.want)
			}
		})
	}
	if got := (driverFlags{createosStoreMB: 3}).createosStoreBytes(); got != 3<<20 {
		t.Fatalf("3 MiB is %d bytes", got)
	}
	if got := (driverFlags{createosStoreMB: -1}).createosStoreBytes(); got != -1 {
		t.Fatalf("the default is %d", got)
	}
}
