package fake

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

func TestPathConfigIsValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		path any
		want []string // the directories, or nil
		errs []string // the refusals, or nil
	}{
		{"absent", nil, nil, nil},
		{"empty", []any{}, []string{}, nil},
		{"two directories", []any{"/opt/bin", "/home/u/.local/bin"}, []string{"/opt/bin", "/home/u/.local/bin"}, nil},
		{"not an array", "/opt/bin", nil, []string{`path must be an array of absolute directories; got "/opt/bin".`}},
		{"an object", map[string]any{"a": "/b"}, nil, []string{`path must be an array of absolute directories; got {"a":"/b"}.`}},
		{"every bad entry named", []any{"/ok", "bin", 7.0, "", "/a:/b", "/a\x00b", nil}, nil, []string{
			`path[1] must be an absolute directory; got "bin".`,
			`path[2] must be an absolute directory; got 7.`,
			`path[3] must be an absolute directory; got "".`,
			`path[4] must not contain ':', which separates PATH entries; got "/a:/b".`,
			`path[5] must not contain a NUL character; got "/a\u0000b".`,
			`path[6] must be an absolute directory; got null.`,
		}},
		{"tilde is not expanded", []any{"~/.local/bin"}, nil, []string{`path[0] must be an absolute directory; got "~/.local/bin".`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := handlers.Object{}
			if tc.path != nil {
				raw["path"] = tc.path
			}
			c := parseConfig(raw)
			if !reflect.DeepEqual(c.Path, tc.want) || !reflect.DeepEqual(c.errs, tc.errs) {
				t.Fatalf("path = %#v, errs = %q; want %#v, %q", c.Path, c.errs, tc.want, tc.errs)
			}
			v, err := New().ValidateConfig(context.Background(), &handlers.ValidateConfigParams{DriverKey: Key, Config: raw})
			if err != nil || v.OK != (tc.errs == nil) || !reflect.DeepEqual(v.Errors, tc.errs) {
				t.Fatalf("validate = %+v, %v", v, err)
			}
			if _, kept := v.NormalizedConfig["path"]; kept != (tc.want != nil) {
				t.Errorf("normalizedConfig = %v", v.NormalizedConfig)
			}
		})
	}
}

func TestCommandPATH(t *testing.T) {
	for _, tc := range []struct {
		name string
		dirs []string
		env  map[string]string
		want string
	}{
		{"default", nil, nil, defaultPATH},
		{"path before the default", []string{"/a", "/b"}, nil, "/a:/b:" + defaultPATH},
		{"explicit env.PATH", nil, map[string]string{"PATH": "/x"}, "/x"},
		{"path before an explicit env.PATH", []string{"/a"}, map[string]string{"PATH": "/x:/y"}, "/a:/x:/y"},
		{"an empty env.PATH stays empty", nil, map[string]string{"PATH": ""}, ""},
		{"path with an empty env.PATH has no cwd entry", []string{"/a"}, map[string]string{"PATH": ""}, "/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandPATH(tc.dirs, tc.env); got != tc.want {
				t.Errorf("commandPATH = %q, want %q", got, tc.want)
			}
		})
	}
}

// writeScript puts an executable shell script name in dir.
func writeScript(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// The config's path is searched first by execute and post-upload
// commands, before the default PATH or an execute's own env.PATH.
func TestPathFindsCommandsFirst(t *testing.T) {
	bin := t.TempDir()
	writeScript(t, bin, "hello", `printf 'hello from path: %s' "$PATH"`+"\n")
	d := newDriver(t)
	b := base("env-1", handlers.Object{"path": []any{bin}})
	l := acquire(t, d, b, "run-1")

	r := execute(t, d, b, l, nil, "hello")
	if r.Stdout != "hello from path: "+bin+":"+defaultPATH {
		t.Errorf("execute = %+v", r)
	}
	r = execute(t, d, b, l, func(p *handlers.ExecuteParams) { p.Env = map[string]string{"PATH": "/usr/bin:/bin"} }, "hello")
	if r.Stdout != "hello from path: "+bin+":/usr/bin:/bin" {
		t.Errorf("execute with env.PATH = %+v", r)
	}

	ws := l.Metadata["remoteCwd"].(string)
	op := handlers.SyncOperation{OperationID: "op", Files: []handlers.SyncFileMapping{}, PostUploadCommands: []handlers.PostUploadCommand{{Command: "hello > out", Cwd: ws}}}
	if _, err := callRPC[handlers.SyncResult](context.Background(), d, "environmentSyncIn", &handlers.SyncParams{BaseParams: b, Lease: *l, Operations: []handlers.SyncOperation{op}}, nil); err != nil {
		t.Fatal(err)
	}
	syncCheckFile(t, filepath.Join(ws, "out"), "hello from path: "+bin+":"+defaultPATH)
}

// A config with an invalid path runs nothing: every call that would run
// a command with it is refused, naming the entry.
func TestInvalidPathRefusesCommands(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	good := base("env-1", nil)
	l := acquire(t, d, good, "run-1")
	bad := base("env-1", handlers.Object{"path": []any{"bin"}})
	const want = `path[0] must be an absolute directory; got "bin".`
	calls := map[string]func() error{
		"acquire": func() error {
			_, err := callRPC[handlers.Lease](ctx, d, "environmentAcquireLease", &handlers.AcquireLeaseParams{BaseParams: bad, RunID: "run-2"}, nil)
			return err
		},
		"resume": func() error {
			_, err := callRPC[handlers.Lease](ctx, d, "environmentResumeLease", &handlers.ResumeLeaseParams{BaseParams: bad, ProviderLeaseID: *l.ProviderLeaseID}, nil)
			return err
		},
		"execute": func() error {
			_, err := callRPC[handlers.ExecuteResult](ctx, d, "environmentExecute", &handlers.ExecuteParams{BaseParams: bad, Lease: *l, Command: "true"}, nil)
			return err
		},
		"syncIn": func() error {
			_, err := callRPC[handlers.SyncResult](ctx, d, "environmentSyncIn", &handlers.SyncParams{BaseParams: bad, Lease: *l}, nil)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, want)
		}
	}
	if pr, err := callRPC[handlers.ProbeResult](ctx, d, "environmentProbe", &handlers.ProbeParams{BaseParams: bad}, nil); err != nil || pr.OK || !strings.Contains(pr.Summary, want) {
		t.Errorf("probe = %+v, %v", pr, err)
	}
}
