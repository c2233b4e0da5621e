package createos

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// A download asks for the raw bytes (Accept-Encoding: identity, so Go's
// transport neither asks for gzip nor inflates an answer), and an answer
// that is encoded all the same is refused before anything is written: a
// 64 KiB gzip body must not become 64 MiB on the host.
func TestSyncOutRequestsRawBytesAndRefusesAnEncodedDownload(t *testing.T) {
	s := newSyncScripted(t)
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	if _, err := zw.Write(make([]byte, 64<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan string, 1)
	s.download = func(w http.ResponseWriter, r *http.Request) {
		accepted <- r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(bomb.Bytes())
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "out")
	_, err := s.d.SyncOut(t.Context(), s.params(op("o", fileMapping("/paperclip-workspace/f", dst))))
	if err == nil || err.Error() != downloadEncoded {
		t.Errorf("err %v, want %q", err, downloadEncoded)
	}
	if got := <-accepted; got != "identity" {
		t.Errorf("Accept-Encoding %q, want identity", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("written on the host: %v", entries)
	}
}

// The download limit applies while the body is written, not once it has
// all arrived: a body that goes past it fails at once, even though the
// provider keeps the stream open, and a declared length past it is refused
// before anything is written. A body of exactly the limit lands.
func TestSyncOutCapsADownloadWhileWriting(t *testing.T) {
	const limit = 1 << 10
	for _, tc := range []struct {
		name     string
		declared bool // Content-Length sent
		size     int
		want     string // the error's text; "" for none
	}{
		{"streamed past the limit", false, limit + 1, downloadTooLarge},
		{"declared past the limit", true, limit + 1, downloadTooLarge},
		{"exactly the limit", false, limit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSyncScripted(t)
				s.d.maxDownload = limit
				s.download = func(w http.ResponseWriter, r *http.Request) {
					if tc.declared {
						w.Header().Set("Content-Length", strconv.Itoa(tc.size))
					}
					_, _ = w.Write(make([]byte, tc.size))
					if !tc.declared && tc.want != "" {
						w.(http.Flusher).Flush()
						<-r.Context().Done() // the body never ends by itself
						panic(http.ErrAbortHandler)
					}
				}
				dir := t.TempDir()
				dst := filepath.Join(dir, "out")
				start := time.Now()
				_, err := s.d.SyncOut(t.Context(), s.params(op("o", fileMapping("/paperclip-workspace/f", dst))))
				if got := errText(err); got != tc.want {
					t.Fatalf("err %q, want %q", got, tc.want)
				}
				if took := time.Since(start); took != 0 {
					t.Errorf("took %v: the limit waited for a deadline", took)
				}
				entries, _ := os.ReadDir(dir)
				if tc.want != "" && len(entries) != 0 || tc.want == "" && len(entries) != 1 {
					t.Errorf("on the host: %v", entries)
				}
			})
		})
	}
}

// What the host reads when a download is refused.
const (
	downloadEncoded  = "CreateOS file download was content-encoded; only raw bytes are accepted."
	downloadTooLarge = "CreateOS file download exceeds the 11 GiB transfer limit."
)

// errText is err's text, or "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
