package fake

import (
	"context"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

type discardSink struct{ n int64 }

func (s *discardSink) Write(_ string, p []byte) { s.n += int64(len(p)) }

// BenchmarkExecuteStreaming measures a command writing 64 MiB through the
// driver: pipe reads, the bounded tail and the live sink.
func BenchmarkExecuteStreaming(b *testing.B) {
	d := New(WithTempDir(b.TempDir()))
	defer d.Close(context.Background())
	bp := base("env-1", nil)
	l, err := d.AcquireLease(context.Background(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	const size = 64 << 20
	b.SetBytes(size)
	for b.Loop() {
		s := &discardSink{}
		r, err := d.Execute(context.Background(), &handlers.ExecuteParams{BaseParams: bp, Lease: *l,
			Command: "dd", Args: []string{"if=/dev/zero", "bs=1M", "count=64", "status=none"}}, s)
		if err != nil || *r.ExitCode != 0 || s.n != size {
			b.Fatalf("%v %+v %d", err, r, s.n)
		}
	}
}

// BenchmarkExecuteShort measures the overhead of one short command.
func BenchmarkExecuteShort(b *testing.B) {
	d := New(WithTempDir(b.TempDir()))
	defer d.Close(context.Background())
	bp := base("env-1", nil)
	l, err := d.AcquireLease(context.Background(), &handlers.AcquireLeaseParams{BaseParams: bp, RunID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := d.Execute(context.Background(), &handlers.ExecuteParams{BaseParams: bp, Lease: *l, Command: "true"}, nil); err != nil {
			b.Fatal(err)
		}
	}
}
