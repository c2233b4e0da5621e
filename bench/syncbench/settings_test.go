package syncbench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    settings
		wantErr bool
	}{
		{name: "defaults", want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}, bandwidth: defaultBandwidth}},
		{name: "a quick look", env: map[string]string{mbEnv: "30", filesEnv: "2000"},
			want: settings{repo: repoSpec{mib: 30, files: 2000, seed: 1}, bandwidth: defaultBandwidth}},
		{name: "another seed and link", env: map[string]string{seedEnv: "9", bandwidthEnv: " up:10M,down:50M "},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 9}, bandwidth: "up:10M,down:50M"}},
		{name: "bandwidth set to nothing skips the throttled half", env: map[string]string{bandwidthEnv: ""},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}}},
		{name: "empty sizes take the defaults", env: map[string]string{mbEnv: "", filesEnv: " "},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}, bandwidth: defaultBandwidth}},
		{name: "not a number", env: map[string]string{mbEnv: "30M"}, wantErr: true},
		{name: "too few files for run 3's edits", env: map[string]string{filesEnv: "100"}, wantErr: true},
		{name: "too many files for the size", env: map[string]string{mbEnv: "1", filesEnv: "20000"}, wantErr: true},
		{name: "negative seed", env: map[string]string{seedEnv: "-1"}, wantErr: true},
		{name: "a tree instead of the generated repository", env: map[string]string{repoEnv: "/usr/src/x", seedEnv: "4"},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 4}, repoDir: "/usr/src/x", bandwidth: defaultBandwidth}},
		{name: "a tree: the generated repository's size is not checked", env: map[string]string{repoEnv: "/x", mbEnv: "1", filesEnv: "20000"},
			want: settings{repo: repoSpec{mib: 1, files: 20000, seed: 1}, repoDir: "/x", bandwidth: defaultBandwidth}},
		{name: "a tree with a file size bound", env: map[string]string{repoEnv: "/x", maxFileEnv: "64"},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}, repoDir: "/x", maxFileMiB: 64, bandwidth: defaultBandwidth}},
		{name: "a negative file size bound", env: map[string]string{maxFileEnv: "-1"}, wantErr: true},
		{name: "an empty tree is the generated repository", env: map[string]string{repoEnv: ""},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}, bandwidth: defaultBandwidth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSettings(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseTrees(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    []string
		set     bool
		wantErr string
	}{
		{name: "not set: the check does not run", env: map[string]string{}},
		{name: "two trees", env: map[string]string{treesEnv: dir + ": " + dir + " :"}, want: []string{dir, dir}, set: true},
		{name: "set to nothing", env: map[string]string{treesEnv: " : "}, set: true, wantErr: "names no directory"},
		{name: "a missing tree fails", env: map[string]string{treesEnv: dir + ":" + filepath.Join(dir, "node_modules")}, set: true,
			want: []string{dir, filepath.Join(dir, "node_modules")}, wantErr: "missing"},
		{name: "a file is not a tree", env: map[string]string{treesEnv: file}, set: true, want: []string{file}, wantErr: "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, set, err := parseTrees(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if set != tc.set || !slices.Equal(got, tc.want) {
				t.Errorf("parseTrees = %q, %v; want %q, %v", got, set, tc.want, tc.set)
			}
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want one about %q", err, tc.wantErr)
			}
		})
	}
}
