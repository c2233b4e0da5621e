// Package registry is the local npm registry of make server-e2e: a
// verdaccio (pinned by the package-lock.json beside this file) on
// loopback, started and stopped by the run, with its storage in the run
// directory. The release is published to it and the server installs the
// plugin from it by name. It has no uplink: it serves the packages of the
// release and nothing else. It also knows the release's package names and
// reads from its log which tarballs it served.
package registry

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/jsonhttp"
	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/proc"
)

// Registry is one running verdaccio.
type Registry struct {
	URL  string // http://127.0.0.1:<port>/
	dir  string // config, storage, htpasswd, the publisher's npmrc and npm cache
	proc *proc.Proc
}

// The release's package names: the main package and the prefix of its
// platform packages (paperclip-go-sandbox-linux-x64).
const (
	MainPackage    = "paperclip-plugin-go-sandbox"
	PlatformPrefix = "paperclip-go-sandbox-"
)

const (
	registryUser = "e2e-publisher"
	// Script is verdaccio's entry point in its install directory.
	Script = "node_modules/verdaccio/bin/verdaccio"
)

// registryConfig is verdaccio's config.yaml: anyone may read, the one
// user the run creates may publish, nothing is proxied, every request is
// logged as a JSON line (level http).
const registryConfig = `storage: %[1]s/storage
auth:
  htpasswd:
    file: %[1]s/htpasswd
    max_users: 1
uplinks: {}
packages:
  '**':
    access: $all
    publish: $authenticated
web:
  enable: false
max_body_size: 100mb
log: { type: stdout, format: json, level: http }
`

// Start starts verdaccio (installed in installDir) with node on a free
// loopback port, its config and storage in dir, its output in
// logDir/verdaccio.log, and waits for it to listen. Once the process is
// started the Registry is returned even with an error, so that the
// caller stops it.
func Start(node, installDir, dir, logDir string) (*Registry, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Registry{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), dir: dir}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "config.yaml"), fmt.Appendf(nil, registryConfig, r.dir), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(node, filepath.Join(installDir, Script), "--config", filepath.Join(r.dir, "config.yaml"), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Env = []string{"PATH=" + filepath.Dir(node) + ":/usr/bin:/bin", "HOME=" + r.dir}
	if r.proc, err = proc.Start("verdaccio", logDir, cmd); err != nil {
		return nil, err
	}
	_, err = r.proc.WaitLine(time.Minute, "verdaccio's http address", func(s string) bool { return strings.Contains(s, `"msg":"http address`) })
	return r, err
}

// freePort is a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Login creates the publishing user (npm adduser's request) and writes
// the publisher's npmrc with its token.
func (r *Registry) Login(ctx context.Context) error {
	body, _ := json.Marshal(map[string]string{"name": registryUser, "password": randomHex(16)})
	req, err := http.NewRequestWithContext(ctx, "PUT", r.URL+"-/user/org.couchdb.user:"+registryUser, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create the registry user: %w", err)
	}
	defer resp.Body.Close()
	var created struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != http.StatusCreated || created.Token == "" {
		return fmt.Errorf("create the registry user: HTTP %d, no token (%v)", resp.StatusCode, err)
	}
	host := strings.TrimPrefix(r.URL, "http:")
	npmrc := fmt.Sprintf("registry=%s\n%s:_authToken=%s\n", r.URL, host, created.Token)
	return os.WriteFile(filepath.Join(r.dir, "npmrc"), []byte(npmrc), 0o600)
}

// Publish publishes every tarball of the release with npm, the platform
// packages before the main package that depends on them, its output in
// logDir/npm-publish.log, and returns the tarballs.
func (r *Registry) Publish(ctx context.Context, releaseDir, logDir string) ([]string, error) {
	tarballs, err := releaseTarballs(releaseDir)
	if err != nil {
		return nil, err
	}
	var log bytes.Buffer
	defer func() { _ = os.WriteFile(filepath.Join(logDir, "npm-publish.log"), log.Bytes(), 0o644) }()
	for _, tgz := range tarballs {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cmd := exec.CommandContext(pctx, "npm", "publish", tgz, "--userconfig", filepath.Join(r.dir, "npmrc"),
			"--cache", filepath.Join(r.dir, "npm-cache"), "--ignore-scripts", "--loglevel", "warn")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.dir}
		out, err := cmd.CombinedOutput()
		cancel()
		fmt.Fprintf(&log, "$ npm publish %s\n%s\n", filepath.Base(tgz), out)
		if err != nil {
			return nil, fmt.Errorf("npm publish %s: %v: %s", filepath.Base(tgz), err, jsonhttp.Truncate(string(out), 2000))
		}
	}
	return tarballs, nil
}

// releaseTarballs is the tarballs of make release, platform packages
// first; it fails unless there is one main package and platform packages.
func releaseTarballs(dir string) ([]string, error) {
	all, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil {
		return nil, err
	}
	sort.Strings(all)
	var platforms, main []string
	for _, f := range all {
		switch base := filepath.Base(f); {
		case strings.HasPrefix(base, PlatformPrefix):
			platforms = append(platforms, f)
		case strings.HasPrefix(base, MainPackage+"-"):
			main = append(main, f)
		}
	}
	if len(main) != 1 || len(platforms) == 0 {
		return nil, fmt.Errorf("%s holds %d main and %d platform tarballs, want 1 and some (run make release first)", dir, len(main), len(platforms))
	}
	return append(platforms, main...), nil
}

// tarballPath matches the path of a package tarball in the registry:
// /<name>/-/<name>-<version>.tgz.
var tarballPath = regexp.MustCompile(`^/([^/]+)/-/[^/]+\.tgz$`)

// Mark is how many log lines verdaccio has written so far.
func (r *Registry) Mark() int { return r.proc.LineCount() }

// Fetched is the packages whose tarballs the registry served (status
// 200) in its log lines from the from-th (a Mark) on, sorted.
func (r *Registry) Fetched(from int) []string { return fetched(r.proc.LinesFrom(from)) }

// fetched is the packages whose tarballs verdaccio's log lines say it
// served (status 200), sorted.
func fetched(lines []string) []string {
	var names []string
	for _, line := range lines {
		var rec struct {
			Request struct{ Method, URL string } `json:"request"`
			Status  int                          `json:"status"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Request.Method != "GET" || rec.Status != 200 {
			continue
		}
		if m := tarballPath.FindStringSubmatch(rec.Request.URL); m != nil && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names
}

// Stop ends verdaccio; an unclean end is an error. It does nothing for
// a nil Registry or one already stopped.
func (r *Registry) Stop() error {
	if r == nil || r.proc == nil {
		return nil
	}
	p := r.proc
	r.proc = nil
	if !p.Stop(10 * time.Second) {
		return errors.New("verdaccio did not exit within 10s of SIGTERM; see " + p.LogName())
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
