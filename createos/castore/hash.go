package castore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
)

// Hash is the SHA-256 of a content, its name in the store.
type Hash [32]byte

// String is h in lower-case hex, as entries are named.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// errHash is text that is not 64 hex digits.
var errHash = errors.New("castore: invalid hash")

// ParseHash reads 64 hex digits (either case).
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return Hash{}, errHash
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return Hash{}, errHash
	}
	return h, nil
}

// bucketName is the directory name of companyID's bucket: the first 32
// hex digits of a domain-separated hash, so untrusted text never becomes
// a file name.
func bucketName(companyID string) string {
	sum := sha256.Sum256([]byte("castore company\x00" + companyID))
	return hex.EncodeToString(sum[:16])
}

// entryName is the root-relative name of h in bucket.
func entryName(bucket string, h Hash) string {
	s := h.String()
	return filepath.Join(bucket, s[:2], s)
}

// isHex reports whether s is n lower-case hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
