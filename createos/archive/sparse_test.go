package archive

import (
	"archive/tar"
	"bytes"
	"fmt"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
)

// Sparse entries let a few bytes of archive declare gigabytes of holes
// that extraction would write out on the host; the validator refuses them.
func TestSyncArchiveValidatorRefusesSparseEntries(t *testing.T) {
	var gnu bytes.Buffer
	w := tar.NewWriter(&gnu)
	if err := w.WriteHeader(&tar.Header{Name: "./s", Typeflag: tar.TypeGNUSparse, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	// archive/tar writes no PAX sparse records itself, so this archive is
	// made by hand: a PAX extended header (GNU sparse 0.1, as GNU tar -S
	// writes it) declaring 8 GiB of holes, then the entry.
	pax := paxRecord("GNU.sparse.size", "8589934592") + paxRecord("GNU.sparse.numblocks", "1") +
		paxRecord("GNU.sparse.map", "0,0")
	var raw bytes.Buffer
	raw.Write(rawHeader("./PaxHeaders/s", 'x', len(pax)))
	raw.WriteString(pax)
	raw.Write(make([]byte, (512-len(pax)%512)%512))
	raw.Write(rawHeader("./s", '0', 0))
	raw.Write(make([]byte, 1024))
	for name, archive := range map[string][]byte{"GNU sparse": gnu.Bytes(), "PAX sparse": raw.Bytes()} {
		t.Run(name, func(t *testing.T) {
			if _, err := validateTar(bytes.NewReader(archive), syncrule.Exclude{}); err != ErrUnsafe {
				t.Fatalf("validateTar = %v, want errUnsafeArchive", err)
			}
		})
	}
	// A plain regular file still passes.
	var b bytes.Buffer
	w = tar.NewWriter(&b)
	_ = w.WriteHeader(&tar.Header{Name: "./f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	_, _ = w.Write([]byte("ok"))
	_ = w.Close()
	if n, err := validateTar(bytes.NewReader(b.Bytes()), syncrule.Exclude{}); err != nil || n != 1 {
		t.Fatalf("plain archive: %d, %v", n, err)
	}
}

// paxRecord is one "len key=value\n" PAX record.
func paxRecord(k, v string) string {
	body := " " + k + "=" + v + "\n"
	n := len(body) + 1
	for len(fmt.Sprint(n))+len(body) != n {
		n = len(fmt.Sprint(n)) + len(body)
	}
	return fmt.Sprint(n) + body
}

// rawHeader is a ustar header block with the given name, type and size.
func rawHeader(name string, typ byte, size int) []byte {
	h := make([]byte, 512)
	copy(h[0:], name)
	copy(h[100:], "0000644\x00")
	copy(h[108:], "0000000\x00")
	copy(h[116:], "0000000\x00")
	copy(h[124:], fmt.Sprintf("%011o\x00", size))
	copy(h[136:], "00000000000\x00")
	h[156] = typ
	copy(h[257:], "ustar\x0000")
	copy(h[148:], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	return h
}
