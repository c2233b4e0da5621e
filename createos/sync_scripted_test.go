package createos

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/filesync"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/launch"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// syncScripted is the scripted provider of file-sync.test.ts: uploads are
// collected, GET /files serves downloads, and every streamed command (a
// transfer command) exits with exitFor(its command), 0 by default.
type syncScripted struct {
	*scripted
	d     *Driver
	lease *handlers.Lease

	mu       sync.Mutex
	uploads  []upload
	commands []string // /bin/bash -c commands, in creation order
	// download answers GET /files; nil serves downloads[path].
	download  func(w http.ResponseWriter, r *http.Request)
	downloads map[string][]byte
	// exitFor chooses a command's exit code.
	exitFor func(command string) int
	// running, when set, is called while a command's output is connected,
	// before its exit frame.
	running func(r *http.Request, command string)
}

type upload struct {
	Path string
	Body []byte
}

func newSyncScripted(t *testing.T) *syncScripted {
	s := &syncScripted{scripted: newScripted(t), downloads: map[string][]byte{}}
	s.d = s.scripted.driver()
	// The reference's request sequence is the whole transfer's; the
	// incremental one runs its helper and is tested on the sim's real
	// sandboxes (sync_incremental_test.go).
	s.d.sync.Mode = filesync.SyncWhole
	s.lease = acquire(t, s.d, nil)
	s.scripted.hook = s.serveSync
	s.scripted.reset()
	return s
}

func (s *syncScripted) serveSync(w http.ResponseWriter, r *http.Request, body []byte) bool {
	p := r.URL.Path
	switch {
	case p == "/v1/sandboxes/sb_test/files" && r.Method == http.MethodPut:
		if !strings.HasSuffix(r.URL.Query().Get("path"), ".paperclip-createos-lease") {
			s.mu.Lock()
			s.uploads = append(s.uploads, upload{r.URL.Query().Get("path"), body})
			s.mu.Unlock()
		}
		return false
	case p == "/v1/sandboxes/sb_test/files" && r.Method == http.MethodGet:
		s.mu.Lock()
		dl, data, ok := s.download, s.downloads[r.URL.Query().Get("path")], true
		if dl == nil && data == nil {
			data, ok = s.downloads["*"]
		}
		s.mu.Unlock()
		switch {
		case dl != nil:
			dl(w, r)
		case ok:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(data)
		default:
			failWith(w, http.StatusNotFound)
		}
		return true
	case p == "/v1/sandboxes/sb_test/exec" && r.URL.Query().Get("stream") == "true":
		var req struct {
			Cmd    string   `json:"cmd"`
			Args   []string `json:"args"`
			Stream bool     `json:"stream"`
			Stdin  string   `json:"stdin"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Cmd != "/bin/bash" || !slices.Equal(req.Args, []string{"-lc", launch.Script}) || !req.Stream {
			s.t.Errorf("stream body %s", body)
		}
		guard, command := guardedCommand(commandOf(s.t, req.Stdin))
		s.mu.Lock()
		if guard != "" {
			s.commands = append(s.commands, guard)
		}
		s.commands = append(s.commands, command)
		exitFor, running := s.exitFor, s.running
		s.mu.Unlock()
		code := 0
		if exitFor != nil && guard != "" {
			code = exitFor(guard)
		}
		if running != nil && code == 0 {
			running(r, command)
		}
		if exitFor != nil && code == 0 {
			code = exitFor(command)
		}
		ndjson(w, `{"exit_code":`+strconv.Itoa(code)+`}`)
		return true
	}
	return false
}

// commandOf recovers the verbatim command from a transfer command's
// launcher data: /bin/bash -c <command> in the workspace.
func commandOf(t *testing.T, data string) string {
	t.Helper()
	c, err := launch.Decode(data)
	if err != nil || c.Cwd != workspaceDir || len(c.Argv) != 3 || c.Argv[0] != "/bin/bash" || c.Argv[1] != "-c" || c.Stdin != nil || len(c.Env) != 0 {
		t.Errorf("%+v (%v) is not a transfer command", c, err)
		return ""
	}
	return c.Argv[2]
}

// guardedCommand splits a post-upload script (postUploadScript) into its
// guard and its verbatim command, so that the scripted provider sees the two steps it
// runs; any other script is a command alone.
func guardedCommand(script string) (guard, command string) {
	const sep = ` && cd -- "$resolved" && exec /bin/bash -c '`
	i := strings.Index(script, sep)
	if !strings.HasPrefix(script, "root=$(realpath -- ") || i < 0 || !strings.HasSuffix(script, "'") {
		return "", script
	}
	return script[:i], strings.ReplaceAll(script[i+len(sep):len(script)-1], `'"'"'`, `'`)
}

func (s *syncScripted) params(ops ...handlers.SyncOperation) *handlers.SyncParams {
	return &handlers.SyncParams{BaseParams: base(nil), Lease: *s.lease, Operations: ops}
}

func (s *syncScripted) gotUploads() []upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]upload(nil), s.uploads...)
}

func (s *syncScripted) gotCommands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// op is one operation with the given mappings.
func op(id string, files ...handlers.SyncFileMapping) handlers.SyncOperation {
	return handlers.SyncOperation{OperationID: id, Files: files}
}
