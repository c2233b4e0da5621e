package createostest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
)

// checkPath accepts Options.Path: absolute, clean sandbox directories that
// a single-quoted shell word and a PATH list can hold.
func checkPath(dirs []string) error {
	for _, d := range dirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsAny(d, ":'\x00\n\r") {
			return fmt.Errorf("path %q: want an absolute sandbox directory without ':', quotes or control characters", d)
		}
	}
	return nil
}

// writeProfile gives a new sandbox's /root a .bash_profile that puts
// Options.Path first on PATH. A login shell (bash -l, which every script
// of the driver runs under) resets PATH from /etc/profile and then reads
// it, so the command's own PATH alone would not reach it.
func (s *Server) writeProfile(home string) error {
	if len(s.opts.Path) == 0 {
		return nil
	}
	words := make([]string, len(s.opts.Path))
	for i, d := range s.opts.Path {
		words[i] = shquote.Quote(d)
	}
	profile := "# createos-sim: Options.Path (--path) comes first on PATH.\nPATH=" +
		strings.Join(words, ":") + ":\"$PATH\"\nexport PATH\n"
	return os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(profile), 0o644)
}
