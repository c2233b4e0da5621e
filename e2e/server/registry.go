package main

import (
	"bytes"
	"context"
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
)

// registry is a verdaccio (pinned by e2e/server/registry/package-lock.json)
// on loopback, started and stopped by the run, with its storage in the run
// directory. The release is published to it and the server installs the
// plugin from it by name. It has no uplink: it serves the packages of the
// release and nothing else.
type registry struct {
	url  string // http://127.0.0.1:<port>/
	dir  string // config, storage, htpasswd, the publisher's npmrc and npm cache
	proc *proc
}

const (
	mainPackage     = "paperclip-plugin-go-sandbox"
	platformPrefix  = "paperclip-go-sandbox-"
	registryUser    = "e2e-publisher"
	verdaccioScript = "node_modules/verdaccio/bin/verdaccio"
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

// startRegistry installs verdaccio (when its lockfile changed), starts it
// on a free loopback port, creates the publishing user and publishes every
// tarball of the release to it.
func (h *harness) startRegistry(ctx context.Context) error {
	installDir := filepath.Join(h.o.cacheDir, "registry")
	if err := installLocked(ctx, h.o.registryNpm, installDir, filepath.Join(h.logDir, "npm-ci-registry.log"), verdaccioScript); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	r := &registry{url: fmt.Sprintf("http://127.0.0.1:%d/", port), dir: filepath.Join(h.runDir, "registry")}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "config.yaml"), fmt.Appendf(nil, registryConfig, r.dir), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(h.node(), filepath.Join(installDir, verdaccioScript), "--config", filepath.Join(r.dir, "config.yaml"), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Env = []string{"PATH=" + filepath.Dir(h.node()) + ":/usr/bin:/bin", "HOME=" + r.dir}
	if r.proc, err = startProc("verdaccio", h.logDir, cmd); err != nil {
		return err
	}
	h.registry = r
	if _, err := r.proc.waitLine(time.Minute, "verdaccio's http address", func(s string) bool { return strings.Contains(s, `"msg":"http address`) }); err != nil {
		return err
	}
	fmt.Println("   verdaccio at", r.url)
	if err := r.login(ctx); err != nil {
		return err
	}
	if err := r.publish(ctx, h.o.releaseDir, h.logDir); err != nil {
		return err
	}
	// The server's npm installs from it: its user's ~/.npmrc, as an
	// operator with a private registry would have it.
	return os.WriteFile(filepath.Join(h.runDir, "home", ".npmrc"), []byte("registry="+r.url+"\n"), 0o644)
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

// login creates the publishing user (npm adduser's request) and writes
// the publisher's npmrc with its token.
func (r *registry) login(ctx context.Context) error {
	body, _ := json.Marshal(map[string]string{"name": registryUser, "password": randomHex(16)})
	req, err := http.NewRequestWithContext(ctx, "PUT", r.url+"-/user/org.couchdb.user:"+registryUser, bytes.NewReader(body))
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
	host := strings.TrimPrefix(r.url, "http:")
	npmrc := fmt.Sprintf("registry=%s\n%s:_authToken=%s\n", r.url, host, created.Token)
	return os.WriteFile(filepath.Join(r.dir, "npmrc"), []byte(npmrc), 0o600)
}

// publish publishes every tarball of the release with npm, the platform
// packages before the main package that depends on them.
func (r *registry) publish(ctx context.Context, releaseDir, logDir string) error {
	tarballs, err := releaseTarballs(releaseDir)
	if err != nil {
		return err
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
			return fmt.Errorf("npm publish %s: %v: %s", filepath.Base(tgz), err, truncate(string(out), 2000))
		}
	}
	fmt.Printf("   published %d tarballs of %s\n", len(tarballs), releaseDir)
	return nil
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
		case strings.HasPrefix(base, platformPrefix):
			platforms = append(platforms, f)
		case strings.HasPrefix(base, mainPackage+"-"):
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

// fetched is the packages whose tarballs the registry served (status
// 200) in its log lines from the from-th on, sorted.
func (r *registry) fetched(from int) []string {
	var names []string
	for _, line := range r.proc.linesFrom(from) {
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

// stop ends verdaccio; an unclean end is an error.
func (r *registry) stop() error {
	if r == nil || r.proc == nil {
		return nil
	}
	p := r.proc
	r.proc = nil
	if !p.stop(10 * time.Second) {
		return errors.New("verdaccio did not exit within 10s of SIGTERM; see " + p.log.Name())
	}
	return nil
}
