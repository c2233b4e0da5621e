package registry

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReleaseTarballsPublishesThePlatformPackagesFirst(t *testing.T) {
	cases := []struct {
		name  string
		files []string
		want  []string // base names; nil: an error
	}{
		{"a release", []string{"paperclip-plugin-go-sandbox-0.1.0.tgz", "paperclip-go-sandbox-linux-x64-0.1.0.tgz", "paperclip-go-sandbox-darwin-arm64-0.1.0.tgz", "notes.txt"},
			[]string{"paperclip-go-sandbox-darwin-arm64-0.1.0.tgz", "paperclip-go-sandbox-linux-x64-0.1.0.tgz", "paperclip-plugin-go-sandbox-0.1.0.tgz"}},
		{"no main package", []string{"paperclip-go-sandbox-linux-x64-0.1.0.tgz"}, nil},
		{"two main packages", []string{"paperclip-plugin-go-sandbox-0.1.0.tgz", "paperclip-plugin-go-sandbox-0.2.0.tgz", "paperclip-go-sandbox-linux-x64-0.1.0.tgz"}, nil},
		{"no platform package", []string{"paperclip-plugin-go-sandbox-0.1.0.tgz"}, nil},
		{"nothing", nil, nil},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		for _, f := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := releaseTarballs(dir)
		var names []string
		for _, g := range got {
			names = append(names, filepath.Base(g))
		}
		if (tc.want == nil) != (err != nil) || !slices.Equal(names, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, names, err, tc.want)
		}
	}
}

func TestFetchedIsTheTarballsTheRegistryServed(t *testing.T) {
	lines := []string{
		`{"level":30,"msg":"127.0.0.1 requested 'GET /paperclip-plugin-go-sandbox'","req":{"method":"GET","url":"/paperclip-plugin-go-sandbox"}}`,
		`{"level":25,"request":{"method":"GET","url":"/paperclip-go-sandbox-darwin-x64"},"status":200}`,
		`{"level":25,"request":{"method":"GET","url":"/paperclip-plugin-go-sandbox/-/paperclip-plugin-go-sandbox-0.1.0.tgz"},"status":200}`,
		`{"level":25,"request":{"method":"GET","url":"/paperclip-go-sandbox-linux-x64/-/paperclip-go-sandbox-linux-x64-0.1.0.tgz"},"status":200}`,
		`{"level":25,"request":{"method":"GET","url":"/paperclip-go-sandbox-linux-x64/-/paperclip-go-sandbox-linux-x64-0.1.0.tgz"},"status":200}`,
		`{"level":25,"request":{"method":"GET","url":"/paperclip-go-sandbox-linux-arm64/-/paperclip-go-sandbox-linux-arm64-0.1.0.tgz"},"status":404}`,
		`{"level":25,"request":{"method":"PUT","url":"/paperclip-go-sandbox-darwin-arm64/-/paperclip-go-sandbox-darwin-arm64-0.1.0.tgz"},"status":200}`,
		`(node:1) Warning: Verdaccio doesn't need superuser privileges`,
	}
	cases := []struct {
		from int
		want []string
	}{
		{0, []string{"paperclip-go-sandbox-linux-x64", "paperclip-plugin-go-sandbox"}},
		{3, []string{"paperclip-go-sandbox-linux-x64"}},
		{len(lines), nil},
	}
	for _, tc := range cases {
		if got := fetched(lines[tc.from:]); !slices.Equal(got, tc.want) {
			t.Errorf("fetched from line %d = %v, want %v", tc.from, got, tc.want)
		}
	}
}
