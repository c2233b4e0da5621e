package syncbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The host's side of a run's workspace staging, as adapter-utils
// 2026.916.1 prepareSandboxManagedRuntime does it for a git workspace:
// a depth-1 clone of HEAD tarred whole (withShallowGitWorkspaceClone,
// createTarballFromDirectory) and an overlay tar of the dirty and
// untracked files (readGitWorkspaceSnapshot's overlayPaths,
// copySelectedWorkspaceEntries).

// gitEnv is the environment of every git and tar the bench runs: no
// user or system configuration, a fixed identity and commit date, so a
// seed makes the same commit anywhere.
func gitEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "TZ=UTC", "LC_ALL=C", "HOME=/nonexistent",
		"GIT_CONFIG_NOSYSTEM=1", "COPYFILE_DISABLE=1",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
	}
}

// run runs name with args in dir and returns its stdout.
func run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, gitEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// git runs git in dir with the bench's identity and no automatic gc (a
// commit of a large tree would start one in the background, racing the
// runs and the scratch's removal).
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return run(ctx, dir, "git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "init.defaultBranch=main", "-c", "gc.auto=0"}, args...)...)
}

// commitRepo makes dir a repository with everything in it committed on
// main. Its loose objects are compressed at level 1: the host's clone
// packs them afresh at git's default level, so only the commit's time
// changes.
func commitRepo(ctx context.Context, dir string) error {
	for _, args := range [][]string{{"init", "-q"}, {"-c", "core.looseCompression=1", "add", "-A"}, {"commit", "-q", "-m", "bench-sync tree"}} {
		if _, err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}

// resetRepo puts dir's working tree back to HEAD: edits undone, untracked
// files removed, ignored ones kept.
func resetRepo(ctx context.Context, dir string) error {
	if _, err := git(ctx, dir, "reset", "-q", "--hard", "HEAD"); err != nil {
		return err
	}
	_, err := git(ctx, dir, "clean", "-q", "-f", "-d")
	return err
}

// hostTars are one run's two tars and what the host read from git to
// build them.
type hostTars struct {
	git, overlay           string   // git-workspace.tar, workspace.tar
	gitBytes, overlayBytes int64    // their sizes
	overlayPaths           []string // the dirty and untracked paths
	ignored                []string // the git-ignored paths, in the host's exclude lists
}

// buildHostTars builds a run's tars from repo in scratch (an empty
// directory): a fresh depth-1 clone of HEAD each time, as the host makes
// one per run.
func buildHostTars(ctx context.Context, repo, scratch string) (hostTars, error) {
	h := hostTars{git: filepath.Join(scratch, "git-workspace.tar"), overlay: filepath.Join(scratch, "workspace.tar")}
	snap, err := readSnapshot(ctx, repo)
	if err != nil {
		return h, err
	}
	h.overlayPaths, h.ignored = snap.overlay, snap.ignored
	clone := filepath.Join(scratch, "clone")
	if err := shallowClone(ctx, repo, clone, snap); err != nil {
		return h, err
	}
	if err := tarDirectory(ctx, clone, h.git, ".paperclip-runtime"); err != nil {
		return h, err
	}
	if err := os.RemoveAll(clone); err != nil {
		return h, err
	}
	overlayDir := filepath.Join(scratch, "workspace-overlay")
	if err := copySelected(repo, overlayDir, snap.overlay, archiveExclude(snap.ignored)); err != nil {
		return h, err
	}
	if err := tarDirectory(ctx, overlayDir, h.overlay); err != nil {
		return h, err
	}
	if err := os.RemoveAll(overlayDir); err != nil {
		return h, err
	}
	if h.gitBytes, err = size(h.git); err != nil {
		return h, err
	}
	h.overlayBytes, err = size(h.overlay)
	return h, err
}

// snapshot is what readGitWorkspaceSnapshot reads of a repository.
type snapshot struct {
	head, branch string
	overlay      []string // changed against HEAD (not deleted) and untracked, sorted
	ignored      []string // ignored, directories collapsed, without their trailing slash
}

func readSnapshot(ctx context.Context, repo string) (snapshot, error) {
	var s snapshot
	outs := make([][]byte, 5)
	for i, args := range [][]string{
		{"rev-parse", "HEAD"},
		{"rev-parse", "--abbrev-ref", "HEAD"},
		{"diff", "--name-only", "-z", "--diff-filter=ACMRTUXB", "HEAD", "--"},
		{"ls-files", "--others", "--exclude-standard", "-z"},
		{"ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"},
	} {
		out, err := git(ctx, repo, args...)
		if err != nil {
			return s, err
		}
		outs[i] = out
	}
	s.head, s.branch = strings.TrimSpace(string(outs[0])), strings.TrimSpace(string(outs[1]))
	s.overlay = slices.Compact(slices.Sorted(slices.Values(append(splitNul(outs[2]), splitNul(outs[3])...))))
	for _, p := range splitNul(outs[4]) {
		if p = strings.TrimRight(p, "/"); p != "" {
			s.ignored = append(s.ignored, p)
		}
	}
	slices.Sort(s.ignored)
	return s, nil
}

func splitNul(b []byte) []string {
	var out []string
	for p := range strings.SplitSeq(string(b), "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// shallowClone is withShallowGitWorkspaceClone: HEAD fetched at depth 1
// into a new repository through a temporary ref, checked out on the same
// branch.
func shallowClone(ctx context.Context, repo, clone string, s snapshot) error {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	ref := "refs/paperclip/git-sync/import/" + hex.EncodeToString(nonce)
	if _, err := git(ctx, repo, "update-ref", ref, s.head); err != nil {
		return err
	}
	defer func() { _, _ = git(context.WithoutCancel(ctx), repo, "update-ref", "-d", ref) }()
	if err := os.MkdirAll(clone, 0o700); err != nil {
		return err
	}
	checkout := []string{"checkout", "-q", "--force", "--detach", "FETCH_HEAD"}
	if s.branch != "" && s.branch != "HEAD" {
		checkout = []string{"checkout", "-q", "--force", "-B", s.branch, "FETCH_HEAD"}
	}
	for _, args := range [][]string{{"init", "-q"}, {"fetch", "-q", "--depth=1", repo, ref}, checkout, {"reset", "-q", "--hard", s.head}} {
		if _, err := git(ctx, clone, args...); err != nil {
			return err
		}
	}
	return nil
}

// tarDirectory is createTarballFromDirectory: dir's top-level entries by
// name, sorted, with "._*" and exclude left out; an empty directory makes
// the empty archive (1024 zero bytes).
func tarDirectory(ctx context.Context, dir, archive string, exclude ...string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return os.WriteFile(archive, make([]byte, 1024), 0o644)
	}
	args := []string{"-c", "--no-xattrs", "-f", archive, "-C", dir}
	for _, e := range append([]string{"._*"}, exclude...) {
		args = append(args, "--exclude", e)
	}
	args = append(args, "--")
	for _, e := range entries { // os.ReadDir sorts by name
		args = append(args, e.Name())
	}
	_, err = run(ctx, dir, "tar", args...)
	return err
}

// copySelected is copySelectedWorkspaceEntries: each of rels that is not
// excluded and still exists, copied from src to dst with its mode (a
// symlink as a symlink, a directory made empty).
func copySelected(src, dst string, rels, exclude []string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, rel := range rels {
		if excluded(rel, exclude) {
			continue
		}
		from, to := filepath.Join(src, filepath.FromSlash(rel)), filepath.Join(dst, filepath.FromSlash(rel))
		fi, err := os.Lstat(from)
		if err != nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			err = os.MkdirAll(to, 0o755)
		case fi.Mode()&os.ModeSymlink != 0:
			var target string
			if target, err = os.Readlink(from); err == nil {
				err = os.Symlink(target, to)
			}
		default:
			err = copyFile(from, to, fi.Mode().Perm())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func size(p string) (int64, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// extractCommand is buildWorkspaceTarExtractCommand: tar extracted into
// the workspace and removed, the workspace first emptied but for
// .paperclip-runtime (and in-flight upload scratch) when wipe is set.
func extractCommand(workspace, tar string, wipe bool) string {
	w := ""
	if wipe {
		w = " && find " + hostQuote(workspace) + " -mindepth 1 -maxdepth 1 ! -name " + hostQuote(".paperclip-runtime") +
			" ! -name " + hostQuote(".paperclip-upload-*") + " -exec rm -rf -- {} +"
	}
	return "mkdir -p " + hostQuote(workspace) + w + " && tar -xf " + hostQuote(tar) + " -C " + hostQuote(workspace) + " && rm -f " + hostQuote(tar)
}

// hostQuote is the host's shellQuote, so the commands are the host's text.
func hostQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }
