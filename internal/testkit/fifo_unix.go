//go:build unix

package testkit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Fifo makes a named pipe and a writer that waits to open it, so that code
// which (wrongly) opens the fifo for reading gets a partner at once and
// returns instead of hanging the test; the writer closes straight away. At
// the end of the test the writer is released (a non-blocking reader is its
// partner) and waited for.
func Fifo(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	}()
	t.Cleanup(func() {
		// Held open until the writer is done: it may not have reached its
		// open yet, and then finds a reader there.
		r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		<-done
		r.Close()
	})
	return p
}
