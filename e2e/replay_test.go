package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc/rpctest"
)

type recordedMsg struct {
	ID     *int            `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

func readRecorded(t *testing.T, name string) (reqs []recordedMsg, replies map[int]recordedMsg) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "server-e2e", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A flow make server-e2e recorded from the real Paperclip server: the
	// host's requests and the worker's replies.
	entries, err := rpctest.ReadTranscript(f)
	if err != nil {
		t.Fatal(err)
	}
	replies = map[int]recordedMsg{}
	for _, e := range entries {
		var m recordedMsg
		if err := json.Unmarshal(e.Msg, &m); err != nil || m.ID == nil {
			t.Fatalf("recorded line without an id: %s", e.AppendLine(nil))
		}
		if e.Dir == rpctest.In {
			reqs = append(reqs, m)
		} else {
			replies[*m.ID] = m
		}
	}
	return reqs, replies
}

// hostTemp matches the host's own temp directories (sync staging and the
// like) in recorded paths; the fake's lease roots are mapped separately.
var hostTemp = regexp.MustCompile(`/tmp/paperclip-(?:[a-z]+-)*[A-Za-z0-9]{6}\b`)

// replayer rewrites recorded requests for this machine: the recorded run
// directory, the host's temp directories and each recorded lease (root
// and id) become this test's. The real agent CLI's directory becomes one
// without it: the replay is of the host's calls, and the agent's execute
// finds no CLI (exit 127, a result like any other).
type replayer struct {
	run, host, claude string
	subs              []string // old, new pairs
}

func (r *replayer) rewrite(raw json.RawMessage) json.RawMessage {
	s := strings.ReplaceAll(string(raw), "{{RUN}}", r.run)
	s = strings.ReplaceAll(s, "{{CLAUDE}}", r.claude)
	s = strings.NewReplacer(r.subs...).Replace(s)
	s = hostTemp.ReplaceAllStringFunc(s, func(p string) string {
		if strings.HasPrefix(p, "/tmp/paperclip-fake-sandbox-") {
			return p
		}
		return filepath.Join(r.host, filepath.Base(p))
	})
	return json.RawMessage(s)
}

// stageHostSide creates the host-side sources a sync-in reads: the host
// made and removed them during the real run. A file source becomes an
// empty tar archive (the host's post-upload commands extract one).
func stageHostSide(t *testing.T, method string, params json.RawMessage) {
	var p struct {
		Operations []struct {
			Files []struct {
				SourcePath, TargetPath, Kind string
			}
		}
	}
	if err := json.Unmarshal(params, &p); err != nil {
		t.Fatal(err)
	}
	for _, op := range p.Operations {
		for _, f := range op.Files {
			host := f.SourcePath
			if method == "environmentSyncOut" {
				host = f.TargetPath
			}
			if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
				t.Fatal(err)
			}
			if method == "environmentSyncIn" {
				if _, err := os.Stat(host); err == nil {
					continue
				}
				var err error
				if f.Kind == "directory" {
					err = os.MkdirAll(host, 0o755)
				} else {
					err = os.WriteFile(host, make([]byte, 1024), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestReplayRecordedHostFlows sends the real server's recorded requests,
// in order, to the fake driver through the binary: every request must get
// a reply of the recorded kind (a result where the host got one, the same
// error code where it got an error). A refusal of a shape the real host
// sends, such as the cwd "/" of its managed-runtime scripts, fails here.
func TestReplayRecordedHostFlows(t *testing.T) {
	for _, name := range []string{"heartbeat-fake-plugin", "heartbeat-fake-plugin-real-cli", "setup-session"} {
		t.Run(name, func(t *testing.T) {
			reqs, replies := readRecorded(t, name)
			w := startRPCWorker(t)
			m, _ := w.Call(1, "initialize", map[string]any{"manifest": map[string]any{}, "config": map[string]any{}}, "", "")
			result(t, "initialize", m)
			r := &replayer{run: filepath.Join(t.TempDir(), "run"), host: t.TempDir(), claude: filepath.Join(t.TempDir(), "no-claude")}
			for _, req := range reqs {
				params := r.rewrite(req.Params)
				if req.Method == "environmentSyncIn" || req.Method == "environmentSyncOut" {
					stageHostSide(t, req.Method, params)
				}
				reply, _ := w.Call(*req.ID, req.Method, params, "", "")
				want := replies[*req.ID]
				switch {
				case want.Error != nil:
					if reply.Error == nil || reply.Error.Code != want.Error.Code {
						t.Fatalf("request %d %s: reply %s, the real run got error code %d", *req.ID, req.Method, reply.Raw, want.Error.Code)
					}
				case reply.Error != nil:
					t.Fatalf("request %d %s: %s; the real run got a result", *req.ID, req.Method, reply.Raw)
				case req.Method == "environmentAcquireLease":
					r.mapLease(t, want.Result, reply.Result)
				}
			}
		})
	}
}

// mapLease records that the recorded lease (id and root) is now got.
func (r *replayer) mapLease(t *testing.T, recordedResult, got json.RawMessage) {
	t.Helper()
	type lease struct {
		ProviderLeaseID string `json:"providerLeaseId"`
		Metadata        struct {
			FakeRootDir string `json:"fakeRootDir"`
		} `json:"metadata"`
	}
	var was, now lease
	if json.Unmarshal(recordedResult, &was) != nil || json.Unmarshal(got, &now) != nil || now.Metadata.FakeRootDir == "" {
		t.Fatalf("acquire: cannot map recorded lease %s to %s", recordedResult, got)
	}
	r.subs = append(r.subs, was.ProviderLeaseID, now.ProviderLeaseID, was.Metadata.FakeRootDir, now.Metadata.FakeRootDir)
}
