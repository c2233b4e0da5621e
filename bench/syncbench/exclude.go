package syncbench

import "strings"

// The host's exclude lists and its reading of them, from adapter-utils
// 2026.916.1 (sandbox-managed-runtime.js, git-workspace-sync.js,
// exclude-patterns.js). The bench reads them the host's way, not through
// internal/syncrule, so the byte-for-byte check does not take the
// driver's reading on trust.

// heavyDirs are SANDBOX_WORKSPACE_HEAVY_DIR_NAMES.
var heavyDirs = []string{"node_modules", "vendor", "dist", "build", "out", "coverage", ".next", ".turbo", ".cache"}

// gitArchiveExcludes are GIT_ARCHIVE_EXCLUDES.
var gitArchiveExcludes = []string{".git", ".git/*"}

// heavyDirExcludes is SANDBOX_WORKSPACE_HEAVY_DIR_EXCLUDES: each heavy
// directory at the root and at any depth, and everything below it.
func heavyDirExcludes() []string {
	var out []string
	for _, d := range heavyDirs {
		out = append(out, d, d+"/*", "*/"+d, "*/"+d+"/*")
	}
	return out
}

// archiveExclude is workspaceArchiveExclude: what the overlay tar leaves
// out of the dirty and untracked paths (ignored: the repository's
// git-ignored paths).
func archiveExclude(ignored []string) []string {
	return merge(heavyDirExcludes(), gitArchiveExcludes, ignored)
}

// restoreExclude is workspaceRestoreExclude for a git workspace without
// nested repositories: the exclude list of the sync-out of the workspace.
func restoreExclude(ignored []string) []string {
	return merge(heavyDirExcludes(), gitArchiveExcludes, []string{".paperclip-runtime"}, ignored)
}

// merge is mergeExcludes: the groups in order, each entry once.
func merge(groups ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, g := range groups {
		for _, e := range g {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// excluded is shouldExcludePath: whether the relative path rel matches
// an entry of exclude.
func excluded(rel string, exclude []string) bool {
	for _, p := range exclude {
		if patternMatches(rel, p) {
			return true
		}
	}
	return false
}

// patternMatches is excludePatternMatches.
func patternMatches(rel, p string) bool {
	switch {
	case strings.HasPrefix(p, "*/") && strings.HasSuffix(p, "/*") && len(p) >= 4:
		return hasSegment(rel, p[2:len(p)-2])
	case strings.HasPrefix(p, "*/"):
		return hasSegment(rel, p[2:])
	case strings.HasSuffix(p, "/*"):
		return strings.HasPrefix(rel, p[:len(p)-2]+"/")
	}
	return rel == p || strings.HasPrefix(rel, p+"/")
}

// hasSegment is pathContainsSegmentOrDescendant.
func hasSegment(rel, seg string) bool {
	return rel == seg || strings.HasPrefix(rel, seg+"/") || strings.HasSuffix(rel, "/"+seg) || strings.Contains(rel, "/"+seg+"/")
}
