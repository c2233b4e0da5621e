package archive

import "github.com/paperclip-sandbox/sandbox-plugin/internal/operator"

// What an operator reads when a host tree or an archive is refused.
var (
	ErrUnsafe        = operator.New("CreateOS archive contains unsafe entries or exceeds the extraction limit.")
	ErrSourceNotFile = operator.New("CreateOS transfer source must be a regular file; fifos, devices and sockets are not transferred.")
	ErrSourceNotDir  = operator.New("CreateOS transfer source must be a directory.")
	ErrSourceChanged = operator.New("CreateOS transfer source changed while it was being read; sync again once it is left alone.")
)

// errLinkLoop and errLinkOutside refuse a host symlink that followSymlinks
// cannot follow (hostfile.go).
func errLinkLoop(entry string) error {
	return operator.Errorf("CreateOS cannot follow host symlink %q: it meets too many levels of symbolic links.", entry)
}

// errLinkOutside is the refusal of a followed host symlink that leads
// outside the mapping's source directory.
func errLinkOutside(entry string) error {
	return operator.Errorf("CreateOS does not follow host symlink %q: it leads outside the source directory; stage the file inside the source directory or omit followSymlinks.", entry)
}
