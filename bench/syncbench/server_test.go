//go:build synctrees

package syncbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/paperclip"
)

// The real Paperclip server's install, whose node_modules is one of the
// trees `make test-sync-trees` checks: the same install `make server-e2e`
// makes and reuses (paperclip.Install: the pinned lockfile, one stamp), so
// whichever of the two runs first installs and the other finds it current.
const (
	serverNpmEnv     = "BENCH_SYNC_SERVER_NPM"     // e2e/server/npm/<version>: the pinned package.json and lockfile
	serverInstallEnv = "BENCH_SYNC_SERVER_INSTALL" // where the install is (out/server-e2e/npm)
)

// installServer makes sure the server's install is in place when both
// variables are set (npm install's log goes beside the install, as
// server-e2e's does); it does nothing when neither is.
func installServer(ctx context.Context, lookup func(string) (string, bool)) error {
	npm, okNpm := lookup(serverNpmEnv)
	dir, okDir := lookup(serverInstallEnv)
	switch {
	case !okNpm && !okDir:
		return nil
	case npm == "" || dir == "":
		return fmt.Errorf("%s=%q and %s=%q: set both or neither", serverNpmEnv, npm, serverInstallEnv, dir)
	}
	logDir := filepath.Dir(dir)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	if err := paperclip.Install(ctx, npm, dir, logDir); err != nil {
		return fmt.Errorf("the real server's install (%s into %s): %w", npm, dir, err)
	}
	return nil
}
