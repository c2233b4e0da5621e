package setup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/trace"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

// traceDir is where the recorder in the installed platform package
// writes: ../trace from its bin/ (interposeRecorder).
func (h *Env) TraceDir() string { return filepath.Join(h.PlatformDir, "trace") }

// traceFiles lists the workers' trace files, oldest worker first.
func (h *Env) TraceFiles() []string { return trace.Files(h.TraceDir()) }

// traceMark is how many entries each trace file had.
func (h *Env) TraceMark() map[string]int { return trace.Mark(h.TraceDir()) }

// traceSince returns the entries written after mark, worker by worker.
func (h *Env) TraceSince(mark map[string]int) []trace.Entry {
	return trace.Since(h.TraceDir(), mark)
}

// redactor redacts the run's recorded messages: the sim's and the
// agent's keys, and the run directory as {{RUN}} and the real CLI's
// directory as {{CLAUDE}}, so fixtures do not churn (and a replay does not
// run the CLI).
func (h *Env) redactor() trace.Redactor {
	return trace.Redactor{Secrets: []string{h.SimKey, h.Srv.AgentKey}, Dirs: [][2]string{{h.ClaudeDir(), "{{CLAUDE}}"}, {h.RunDir, "{{RUN}}"}}}
}

// writeTraffic keeps the host's requests and the worker's replies of every
// recorded flow under out/, redacted, and
// with -update also as the fixtures under testdata/.
func (h *Env) writeTraffic(ctx context.Context) error {
	dirs := []string{filepath.Join(h.Opts.OutDir, "traffic")}
	if h.Opts.Update {
		dirs = append(dirs, h.Opts.Fixtures)
	}
	redactor := h.redactor()
	for name, es := range h.Traffic {
		var b strings.Builder
		for _, e := range es {
			// Requests and replies only: the execute.log and log
			// notifications are output, not the host's call pattern.
			if e.Dir == "exit" || len(e.Msg) == 0 || (e.Dir == "out" && e.RPC().Method != "") {
				continue
			}
			b.Write(rpctest.Entry{Dir: e.Dir, Msg: redactor.Redact(trace.ElideChannelBytes(e.Msg))}.AppendLine(nil))
		}
		for _, d := range dirs {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, name+".jsonl"), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
	}
	fmt.Println("   traffic in", strings.Join(dirs, " and "))
	return nil
}
