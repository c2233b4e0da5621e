package filesync

import (
	"fmt"
	"path"
	"strconv"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/delta"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/guest"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/script"
)

// Transfer scripts: every shell command a sync runs in the sandbox, built
// word by word by the script package (values quoted once, as the word is
// made), its commands joined by " && " so that the first failure ends it.

// Expansions of the guard's result, and of the staged copy beside it.
const (
	resolved       script.Sh = `"$resolved"`
	resolvedParent script.Sh = `"$(dirname -- "$resolved")"`
	staged         script.Sh = `"$staged"`
)

// guarded starts a script with the reference's in-sandbox guard of
// candidate: it canonicalises the path at use time and exits unless it
// still lies in the workspace; later commands use "$resolved". It needs GNU
// realpath -m; without it the guard fails closed.
func guarded(candidate string) (*script.Script, error) {
	if err := CheckSandboxPath(candidate); err != nil {
		return nil, err
	}
	s := script.New(script.And)
	s.Run(script.Cat{script.Sh("root=$(realpath -- "), script.Value(Workspace), script.Sh(")")})
	s.Run(script.Sh("test"), script.Sh(`"$root"`), script.Sh("="), script.Value(Workspace))
	s.Run(script.Cat{script.Sh("resolved=$(realpath -m -- "), script.Value(candidate), script.Sh(")")})
	s.Run(script.Sh(`case "$resolved" in "$root"|"$root"/*) ;; *) exit 1 ;; esac`))
	return s, nil
}

// postUploadScript runs a post-upload command in cwd once the guard has
// proved that cwd lies in the workspace, in one request: the command runs
// with bash -c in the path the guard resolved, so what was proved is where
// it runs.
func postUploadScript(cwd, command string) (string, error) {
	s, err := guarded(cwd)
	if err != nil {
		return "", err
	}
	return s.Run(script.Sh("cd"), script.Sh("--"), resolved).
		Run(script.Sh("exec"), script.Sh("/bin/bash"), script.Sh("-c"), script.Value(command)).Build()
}

// Guard is the guard of candidate alone, as every sync script begins.
func Guard(candidate string) (string, error) {
	s, err := guarded(candidate)
	if err != nil {
		return "", err
	}
	return s.Build()
}

// placeFileScript puts an uploaded scratch file at the mapping's target
// with its mode, and removes the scratch file once it has landed (a landing
// that did not finish leaves it to the cleanup request). The scratch file is in /tmp, another mount than the
// workspace, where mv is a copy and an unlink: a landing killed halfway
// (its call failed and the driver ended it) would leave a truncated
// target. So it is copied beside the target first (stagedName) and then
// renamed over it, in one directory: the target holds the old file or the
// new one, never a part. removeStagedScript removes a staged copy a killed
// landing left.
func placeFileScript(target, scratch string, m uint32) (string, error) {
	s, err := stagedBeside(target, scratch)
	if err != nil {
		return "", err
	}
	return s.Run(script.Sh("mkdir"), script.Sh("-p"), script.Sh("--"), resolvedParent).
		Run(script.Sh("cp"), script.Sh("--"), script.Value(scratch), staged).
		Run(script.Sh("chmod"), script.Mode(m), script.Sh("--"), staged).
		Run(script.Sh("mv"), script.Sh("-f"), script.Sh("--"), staged, resolved).
		Run(script.Sh("rm"), script.Sh("-f"), script.Sh("--"), script.Value(scratch)).Build()
}

// stagedBeside is the guard of target with $staged set to the staged copy
// of scratch beside it.
func stagedBeside(target, scratch string) (*script.Script, error) {
	s, err := guarded(target)
	if err != nil {
		return nil, err
	}
	return s.Run(script.Cat{script.Sh("staged="), resolvedParent, script.Sh("/"), script.Value(stagedName(scratch))}), nil
}

// stagedName is the hidden name a scratch file's staged copy has beside
// its target.
func stagedName(scratch string) string { return "." + path.Base(scratch) }

// removeStagedScript removes the scratch files (the scratch file first,
// then what was made beside it) and, when
// the target still guards, the staged copy placeFileScript may have left
// beside it.
func removeStagedScript(target string, scratch []string) (string, error) {
	s, err := stagedBeside(target, scratch[0])
	if err != nil {
		return "", err
	}
	s.Run(script.Sh("rm"), script.Sh("-f"), script.Sh("--"), staged)
	rm := []script.Word{script.Sh("rm"), script.Sh("-f"), script.Sh("--")}
	for _, n := range scratch {
		rm = append(rm, script.Value(n))
	}
	return script.New(script.Seq).Run(rm...).Run(s).Build()
}

// extractDirectoryScript extracts an uploaded archive into the mapping's
// target directory (merging into what is there), sets its mode and removes
// the archive.
func extractDirectoryScript(target, scratch string, m uint32) (string, error) {
	s, err := guarded(target)
	if err != nil {
		return "", err
	}
	return s.Run(script.Sh("mkdir"), script.Sh("-p"), script.Sh("--"), resolved).
		Run(script.Sh("tar"), script.Sh("-xf"), script.Value(scratch), script.Sh("-C"), resolved).
		Run(script.Sh("chmod"), script.Mode(m), script.Sh("--"), resolved).
		Run(script.Sh("rm"), script.Sh("-f"), script.Sh("--"), script.Value(scratch)).Build()
}

// copyFileScript copies the mapping's source file to the scratch path.
func copyFileScript(source, scratch string) (*script.Script, error) {
	s, err := guarded(source)
	if err != nil {
		return nil, err
	}
	return s.Run(script.Sh("test"), script.Sh("-f"), resolved).
		Run(script.Sh("cp"), script.Sh("--"), resolved, script.Value(scratch)), nil
}

// archiveDirectoryScript archives the mapping's source directory to the
// scratch path with GNU tar, dereferencing symlinks iff follow. With an
// exclude list, tar drops by itself what it provably drops alike
// (syncrule.Exclude.TarPrune: plain paths, anchored or not, that no
// wildcard switch of tar's reads differently; --no-wildcards is there all
// the same) and archives hard links as files (--hard-dereference): the
// host filters the rest entry by entry, and a link must not lead to an
// entry it left out.
func archiveDirectoryScript(source, scratch string, follow bool, anchored, unanchored []string, filtered bool) (*script.Script, error) {
	s, err := guarded(source)
	if err != nil {
		return nil, err
	}
	args := []script.Word{script.Sh("tar")}
	if follow {
		args = append(args, script.Sh("-h"))
	}
	if filtered {
		args = append(args, script.Sh("--hard-dereference"))
	}
	if len(anchored)+len(unanchored) > 0 {
		args = append(args, script.Sh("--no-wildcards"))
	}
	if len(anchored) > 0 {
		args = append(args, script.Sh("--anchored"))
		for _, a := range anchored {
			args = append(args, script.Sh("--exclude"), script.Value("./"+a))
		}
	}
	if len(unanchored) > 0 {
		args = append(args, script.Sh("--no-anchored"))
		for _, x := range unanchored {
			args = append(args, script.Sh("--exclude"), script.Value(x))
		}
	}
	args = append(args, script.Sh("-cf"), script.Value(scratch), script.Sh("-C"), resolved, script.Sh("."))
	return s.Run(script.Sh("test"), script.Sh("-d"), resolved).Run(args...), nil
}

// helperWords runs a sync subcommand of the sandbox program
// (createos/guest) with node (found on the sandbox's PATH, or the program
// node names): the program is the -e argument, then the subcommand and
// its arguments.
func helperWords(node string, args ...string) []script.Word {
	if node == "" {
		node = "node"
	}
	words := []script.Word{script.Sh("/usr/bin/env"), script.Value(node), script.Sh("-e"), script.Value(guest.Program)}
	for _, a := range args {
		words = append(words, script.Value(a))
	}
	return words
}

// helperScript is the helper alone.
func helperScript(node string, args ...string) (string, error) {
	return script.New(script.And).Run(helperWords(node, args...)...).Build()
}

// applyFileScript rebuilds an uploaded stream into the staged copy beside
// the mapping's target (the helper checks it against the stream's end
// hash), gives it its mode and renames it over the target, as
// placeFileScript does with a whole file.
func applyFileScript(node, target, scratch string, m uint32) (string, error) {
	s, err := stagedBeside(target, scratch)
	if err != nil {
		return "", err
	}
	return s.Run(script.Sh("mkdir"), script.Sh("-p"), script.Sh("--"), resolvedParent).
		Run(append(helperWords(node, "apply", scratch), staged, script.Value(Workspace))...).
		Run(script.Sh("chmod"), script.Mode(m), script.Sh("--"), staged).
		Run(script.Sh("mv"), script.Sh("-f"), script.Sh("--"), staged, resolved).
		Run(script.Sh("rm"), script.Sh("-f"), script.Sh("--"), script.Value(scratch), script.Value(scratch+".index")).Build()
}

// applyDirectoryScript rebuilds an uploaded stream into the archive it
// describes beside the scratch file and extracts that as
// extractDirectoryScript does.
func applyDirectoryScript(node, target, scratch string, m uint32) (string, error) {
	s, err := guarded(target)
	if err != nil {
		return "", err
	}
	archive := scratch + ".out"
	return s.Run(script.Sh("mkdir"), script.Sh("-p"), script.Sh("--"), resolved).
		Run(helperWords(node, "apply", scratch, archive, Workspace)...).
		Run(script.Sh("tar"), script.Sh("-xf"), script.Value(archive), script.Sh("-C"), resolved).
		Run(script.Sh("chmod"), script.Mode(m), script.Sh("--"), resolved).
		Run(script.Sh("rm"), script.Sh("-f"), script.Sh("--"), script.Value(scratch), script.Value(archive), script.Value(scratch+".index")).Build()
}

// indexScript lists the sandbox store's hashes at index, and exits
// exitIndexTooLarge when the list is past maxIndex (it is then not
// downloaded).
func indexScript(node, index string) (string, error) {
	words := append(helperWords(node, "index", index, Workspace), script.Sh("&&"), script.Sh("{"), script.Sh("test"),
		script.Cat{script.Sh(`"$(stat -c %s -- `), script.Value(index), script.Sh(`)"`)}, script.Sh("-le"), script.Sh(strconv.Itoa(maxIndex)),
		script.Sh("||"), script.Sh("exit"), script.Sh(strconv.Itoa(exitIndexTooLarge)+";"), script.Sh("}"))
	return script.New(script.And).Run(words...).Build()
}

// withRecipe follows an outbound command with the helper's recipe of what
// it put at scratch, unless that is under MinIncremental (exitSmall). A
// recipe that cannot be made exits exitNoRecipe (no node),
// delta.ExitStoreBad (the sandbox's store made afresh) or
// exitHelperFailed. Either way the file is still there to fetch whole.
func withRecipe(s *script.Script, node, kind, scratch string) *script.Script {
	words := []script.Word{script.Sh("{"), script.Sh("test"), script.Cat{script.Sh(`"$(stat -c %s -- `), script.Value(scratch), script.Sh(`)"`)},
		script.Sh("-ge"), script.Sh(strconv.Itoa(MinIncremental)), script.Sh("||"), script.Sh("exit"), script.Sh(strconv.Itoa(exitSmall) + ";")}
	words = append(words, helperWords(node, "recipe", kind, scratch, scratch+".recipe", Workspace)...)
	words = append(words, script.Sh(fmt.Sprintf(`|| { c=$?; case $c in %d) exit %d ;; %d) exit %d ;; *) exit %d ;; esac; }; }`,
		exitNoHelper, exitNoRecipe, delta.ExitStoreBad, delta.ExitStoreBad, exitHelperFailed)))
	return s.Run(words...)
}
