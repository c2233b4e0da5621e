package syncrule

import (
	"regexp"
	"strings"
)

// The host's own code, ported line for line as the oracle of the tests
// (@paperclipai/adapter-utils 2026.916.1).

// hostExcludePatternMatches is exclude-patterns.js excludePatternMatches.
func hostExcludePatternMatches(relative, pattern string) bool {
	switch {
	case strings.HasPrefix(pattern, "*/") && strings.HasSuffix(pattern, "/*"):
		return hostContainsSegmentOrDescendant(relative, jsSlice(pattern, 2, -2))
	case strings.HasPrefix(pattern, "*/"):
		return hostContainsSegmentOrDescendant(relative, pattern[2:])
	case strings.HasSuffix(pattern, "/*"):
		return strings.HasPrefix(relative, pattern[:len(pattern)-2]+"/")
	}
	return hostIsRelativePathOrDescendant(relative, pattern)
}

// hostIsRelativePathOrDescendant is exclude-patterns.js
// isRelativePathOrDescendant.
func hostIsRelativePathOrDescendant(relative, candidate string) bool {
	return relative == candidate || strings.HasPrefix(relative, candidate+"/")
}

// hostContainsSegmentOrDescendant is exclude-patterns.js
// pathContainsSegmentOrDescendant.
func hostContainsSegmentOrDescendant(relative, segment string) bool {
	return relative == segment ||
		strings.HasPrefix(relative, segment+"/") ||
		strings.HasSuffix(relative, "/"+segment) ||
		strings.Contains(relative, "/"+segment+"/")
}

// hostShouldExcludePath is exclude-patterns.js shouldExcludePath.
func hostShouldExcludePath(relative string, exclude []string) bool {
	for _, p := range exclude {
		if hostExcludePatternMatches(relative, p) {
			return true
		}
	}
	return false
}

// jsSlice is String.prototype.slice(start, end) for 0 <= start and end < 0.
func jsSlice(s string, start, end int) string {
	end += len(s)
	if end <= start {
		return ""
	}
	return s[start:end]
}

var tarMeta = regexp.MustCompile(`([*?[])`)

// hostEscapeTarExcludeLiteral is sandbox-managed-runtime.js
// escapeTarExcludeLiteral.
func hostEscapeTarExcludeLiteral(entry string) string {
	return tarMeta.ReplaceAllString(strings.ReplaceAll(entry, `\`, `\\`), `\$1`)
}

// hostHeavyDirExcludes is SANDBOX_WORKSPACE_HEAVY_DIR_EXCLUDES.
func hostHeavyDirExcludes() []string {
	var out []string
	for _, n := range []string{"node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"} {
		out = append(out, n, n+"/*", "*/"+n, "*/"+n+"/*")
	}
	return out
}

// hostRestoreExclude is the list the real server sent with the workspace
// restore's environmentSyncOut (testdata/server-e2e): the heavy
// directories, GIT_ARCHIVE_EXCLUDES and .paperclip-runtime.
func hostRestoreExclude() []string {
	return append(hostHeavyDirExcludes(), ".git", ".git/*", ".paperclip-runtime")
}

// tarLiteralExcluded is what GNU tar excludes for a pattern without
// wildcard characters (gnulib exclude.c excluded_file_name_p, with
// --recursion's FNM_LEADING_DIR): the name or a leading part of it ending
// before a "/" equals the pattern; unanchored, for any tail of the name
// that starts after a "/" too.
func tarLiteralExcluded(name, pattern string, anchored bool) bool {
	for f := name; ; {
		for buf := f; ; {
			if buf == pattern {
				return true
			}
			i := strings.LastIndexByte(buf, '/')
			if i < 0 {
				break
			}
			buf = buf[:i]
		}
		if anchored {
			return false
		}
		i := strings.IndexByte(f, '/')
		if i < 0 {
			return false
		}
		f = f[i+1:]
	}
}
