package archive

import (
	"errors"
	"io/fs"
	"os"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/safeopen"
)

// Host files are read for syncIn only, and never in a way that can block:
// a fifo opened for reading waits for a writer, and no deadline can
// interrupt an open (it would hold the sync, and the lease's release with
// it, for good). A host name is looked at first (stat opens nothing); only
// a regular file or a directory is opened, without blocking and without
// following a link where none was seen, and the opened handle must then
// be what was looked at (openAsSeen), since the name may have been
// replaced in between. The rule is the fake driver's
// (package fake/synccopy): a mapping's own source, resolved if it is a
// symlink, must be a regular file (or a directory); inside a directory,
// fifos, devices and sockets are left out; a name that changed between
// the look and the open is refused.

// OpenSourceFile opens a file mapping's host source, resolved if it is a
// symlink, and returns it with its info. A source that is not a regular
// file is ErrSourceNotFile, and is never opened.
func OpenSourceFile(name string) (*os.File, fs.FileInfo, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, ErrSourceNotFile
	}
	f, err := openAsSeen(os.OpenFile, name, info, true)
	return f, info, err
}

// openAsSeen opens name through open (os.OpenFile, or a source tree's
// root), which stat (follow) or lstat saw as seen, a regular file or a
// directory, for reading without waiting on it (safeopen.OpenAsSeen, the
// rule both drivers' syncs open by). A name that is no longer what was
// seen is ErrSourceChanged.
func openAsSeen(open safeopen.Opener, name string, seen fs.FileInfo, follow bool) (*os.File, error) {
	f, err := safeopen.OpenAsSeen(open, name, seen, follow)
	if errors.Is(err, safeopen.ErrChanged) {
		return nil, ErrSourceChanged
	}
	return f, err
}

// A directory mapping's host source is read as a safeopen.Tree: through
// its open root, so that no name leads out of it however it changes
// meanwhile. With followSymlinks a link is followed only when it
// resolves, through every link on its way, to a name inside the source
// (Tree.Resolve, the fake's rule too): sync-out keeps links as written,
// so a sandbox can leave ws/x -> /etc/shadow in the host workspace, and a
// later sync-in of that tree must not upload what it names. A link that
// leads outside refuses the mapping before anything of it is uploaded.

// openSourceTree opens the directory src, which stat saw as info, as a
// Tree (safeopen.OpenTreeAsSeen, both drivers' rule); another directory in
// its place by then is ErrSourceChanged.
func openSourceTree(src string, info fs.FileInfo) (*safeopen.Tree, error) {
	tree, err := safeopen.OpenTreeAsSeen(src, info)
	if errors.Is(err, safeopen.ErrChanged) {
		return nil, ErrSourceChanged
	}
	return tree, err
}

// followLink resolves the symlink src of tree (the archive entry name) to
// the link-free name it leads to and what is there. One that leads
// outside the tree is errLinkOutside.
func followLink(tree *safeopen.Tree, src, name string) (string, fs.FileInfo, error) {
	r, info, err := tree.Resolve(src)
	switch {
	case errors.Is(err, safeopen.ErrOutside):
		return "", nil, errLinkOutside(entryName(name, false))
	case errors.Is(err, safeopen.ErrLoop):
		return "", nil, errLinkLoop(entryName(name, false))
	}
	return r, info, treeErr(err)
}

// treeErr is err from a look into a source tree, with os.Root's refusal of
// a name that leads out of the tree (which no listed name did when it was
// listed) as ErrSourceChanged.
func treeErr(err error) error {
	if safeopen.IsEscape(err) {
		return ErrSourceChanged
	}
	return err
}

// listedErr is err from a look at a name the packer listed (or the root),
// with a name gone since (removed, or its directory renamed away) as
// ErrSourceChanged too: the source changed under the sync, which the
// operator can retry, as the fake driver says.
func listedErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return ErrSourceChanged
	}
	return treeErr(err)
}
