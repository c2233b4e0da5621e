package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/paperclip-sandbox/sandbox-plugin/fake/proctree"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/envrule"
)

// execution is one running command. Its owner is the Execute call that
// created it; others may only ask it to stop.
type execution struct {
	stopOnce sync.Once
	stopCh   chan struct{} // closed when termination is requested
	reason   string
	// stopped is set by the owner when a stop request took effect: the
	// command never started, or its process group was terminated for it.
	stopped bool
	// session marks a live session's process (session.go): a release does
	// not wait for it to finish by itself before stopping it.
	session bool

	done chan struct{} // closed when Execute is finished with the process
}

func newExecution() *execution {
	return &execution{stopCh: make(chan struct{}), done: make(chan struct{})}
}

// stop asks the execution to terminate; repeated calls coalesce.
func (e *execution) stop(reason string) {
	e.stopOnce.Do(func() {
		e.reason = reason
		close(e.stopCh)
	})
}

func (e *execution) stopRequested() bool {
	select {
	case <-e.stopCh:
		return true
	default:
		return false
	}
}

// Execute implements handlers.Driver: command and args run directly (no
// shell) in their own process group, in the cwd the host asks for (see
// (*run).cwd), with only PATH, the lease's marker (proctree.MarkerVar) and the
// explicit env.
func (d *Driver) Execute(ctx context.Context, p *handlers.ExecuteParams, out handlers.OutputSink) (*handlers.ExecuteResult, error) {
	c := parseConfig(p.Config)
	startedAt := isoMillis(d.now())
	cmdLine := commandLine(p.Command, p.Args)
	meta := handlers.Object{"startedAt": startedAt, "commandLine": cmdLine}

	leaseID := p.Lease.LeaseID()
	if leaseID == "" {
		return failed(1, stderrLine(errNoLeaseID), meta), nil
	}
	d.mu.Lock()
	l, ok := d.leases[leaseID]
	d.mu.Unlock()
	if !ok {
		return failed(1, stderrLine(errLeaseNotActive(leaseID)), meta), nil
	}
	if err := l.owned(&p.BaseParams); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := envrule.Check(p.Env); err != nil {
		return nil, err // the CreateOS driver's refusal, word for word
	}
	if _, ok := p.Env[proctree.MarkerVar]; ok {
		return nil, errMarkerInEnv
	}

	e := newExecution()
	defer close(e.done)
	if p.ExecutionID != nil {
		key := execKey(p.BaseParams, &p.Lease, *p.ExecutionID)
		if err := d.execs.Register(key, e); err != nil {
			return nil, err
		}
		defer d.execs.Unregister(key, func(v *execution) bool { return v == e })
	}
	timeout := c.TimeoutMs
	if p.TimeoutMs != nil {
		timeout = *p.TimeoutMs
	}
	r := &run{l: l, e: e, p: p, out: out, maxOut: c.MaxOutputBytes, path: c.Path, meta: meta, beforeSpawn: d.beforeSpawn}
	return r.do(ctx, msDuration(timeout))
}

// failed is a result for a command that could not run.
func failed(code int, stderr string, meta handlers.Object) *handlers.ExecuteResult {
	return &handlers.ExecuteResult{ExitCode: &code, Stdout: "", Stderr: stderr, Metadata: meta}
}

// run is the state of one Execute call.
type run struct {
	l           *lease
	e           *execution
	p           *handlers.ExecuteParams
	out         handlers.OutputSink
	maxOut      int
	path        []string // Config.Path
	meta        handlers.Object
	beforeSpawn func() // Driver.beforeSpawn
}

// proc is a started command and the worker's ends of its output pipes.
type proc struct {
	cmd        *exec.Cmd
	ch         proctree.Child
	outR, errR *os.File
}

// do runs the command: start takes it to a started process (or to the
// result of one that will not run), collect waits for it and builds the
// result. The execution is in the lease's running set from start until do
// returns, so that a release waits for it and stops it.
func (r *run) do(ctx context.Context, timeout time.Duration) (*handlers.ExecuteResult, error) {
	defer r.l.leave(r.e)
	p, res, err := r.start()
	if p == nil {
		return res, err
	}
	return r.collect(ctx, p, timeout)
}

// start joins the lease, prepares the command and spawns it. A nil proc
// comes with the result or error to answer instead.
func (r *run) start() (*proc, *handlers.ExecuteResult, error) {
	if err := r.l.join(r.e); err != nil {
		return nil, nil, err
	}
	if r.beforeSpawn != nil {
		r.beforeSpawn()
	}
	if r.e.stopRequested() { // a cancel raced the start and won: nothing runs
		r.e.stopped = true
		r.meta["cancelled"] = true
		return nil, failed(130, stderrCancelledEarly, r.meta), nil
	}
	cmd, res := r.prepare()
	if cmd == nil {
		return nil, res, nil
	}
	return r.spawn(cmd)
}

// prepare resolves where and what the command runs: its cwd must be a
// directory and its executable is found as the child would find it. A
// command that cannot run gets its result instead, with a shell's exit
// codes (126 not executable, 127 not found).
func (r *run) prepare() (*exec.Cmd, *handlers.ExecuteResult) {
	cwd := r.cwd()
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		why := "not a directory"
		if err != nil {
			why = unwrapPathErr(err).Error()
		}
		return nil, failed(1, stderrBadCwd(cwd, why), r.meta)
	}
	path, err := lookPath(r.p.Command, commandPATH(r.path, r.p.Env), cwd)
	if err != nil {
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return nil, failed(code, stderrCannotRun(r.p.Command, describeLookErr(err)), r.meta)
	}
	return newCommand(path, append([]string{r.p.Command}, r.p.Args...), buildEnv(r.p.Env, r.l.root, r.path), cwd), nil
}

// spawn starts cmd with its stdin staged and its output on fresh pipes.
// The worker's copies of the child's ends are closed once the child holds
// them, so that the read ends see EOF when the last writer is gone.
func (r *run) spawn(cmd *exec.Cmd) (*proc, *handlers.ExecuteResult, error) {
	if r.p.Stdin != nil {
		stdin, err := stageStdin(*r.p.Stdin)
		if err != nil {
			return nil, nil, err
		}
		defer stdin.Close()
		cmd.Stdin = stdin
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	growPipe(outR)
	growPipe(errR)
	cmd.Stdout, cmd.Stderr = outW, errW
	ch, startErr := proctree.Children.Start(cmd, r.l.root)
	outW.Close()
	errW.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		return nil, failed(127, stderrCannotRun(r.p.Command, unwrapPathErr(startErr)), r.meta), nil
	}
	return &proc{cmd: cmd, ch: ch, outR: outR, errR: errR}, nil, nil
}

// collect streams the started command's output into its tails and to the
// host while supervise waits for the command, then builds the result.
func (r *run) collect(ctx context.Context, p *proc, timeout time.Duration) (*handlers.ExecuteResult, error) {
	stdout, stderr := newTail(r.maxOut), newTail(r.maxOut)
	var readers sync.WaitGroup
	readers.Add(2)
	go r.copy(&readers, p.outR, "stdout", stdout)
	go r.copy(&readers, p.errR, "stderr", stderr)

	end, confirmed, waitErr := supervise(ctx, p.cmd, p.ch, timeout, r.e.stopCh)
	switch end {
	case endStopped:
		r.meta["cancelled"] = true
		r.e.stopped = confirmed
	case endCancelled:
		r.meta["cancelled"] = true
	}
	p.drain(&readers)

	if p.cmd.ProcessState == nil { // Wait failed without reaping: nothing to report
		return nil, fmt.Errorf("wait for command: %w", waitErr)
	}
	timedOut := end == endTimedOut
	res := &handlers.ExecuteResult{TimedOut: timedOut, Stdout: stdout.String(), Stderr: stderr.String(), Metadata: r.meta}
	if stdout.truncated() || stderr.truncated() {
		r.meta["outputTruncated"] = true
	}
	res.ExitCode, res.Signal = exitOf(p.cmd.ProcessState, timedOut)
	zerolog.Ctx(ctx).Debug().Int("pid", p.cmd.Process.Pid).Bool("timedOut", timedOut).Msg("fake command finished")
	return res, nil
}

// drain gives the readers output still arriving from background children
// for up to pipeDrain, then closes the pipes so that they cannot hold the
// call.
func (p *proc) drain(readers *sync.WaitGroup) {
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	t := time.NewTimer(pipeDrain)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		p.outR.Close()
		p.errR.Close()
		<-drained
	}
	p.outR.Close()
	p.errR.Close()
}

// exitOf is how a reaped command ended, as the result reports it: the
// signal that killed it, else its exit code; a command that timed out but
// exited by itself (on SIGTERM) has neither, TimedOut says why it ended.
func exitOf(ps *os.ProcessState, timedOut bool) (code *int, signal *string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		return nil, &name
	}
	if timedOut {
		return nil, nil
	}
	c := ps.ExitCode()
	return &c, nil
}

// copy reads one output stream into its tail and the host stream.
func (r *run) copy(wg *sync.WaitGroup, src *os.File, stream string, t *tail) {
	defer wg.Done()
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			t.Write(buf[:n])
			if r.out != nil {
				r.out.Write(stream, buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// cwd is where the command runs, as the host asks: an absolute cwd as
// given (the host's managed-runtime scripts use "/" on purpose), a relative
// one against the lease workspace, none the lease workspace. The fake does
// not confine commands: they run as the worker's user on this machine.
func (r *run) cwd() string {
	switch cwd := r.p.Cwd; {
	case cwd == "":
		return r.l.workspace
	case filepath.IsAbs(cwd):
		return filepath.Clean(cwd)
	default:
		return filepath.Join(r.l.workspace, cwd)
	}
}

// commandPATH is the PATH a command runs with and is found through: the
// config's path directories first (Config.Path), then env's PATH when the
// call sets one (an explicit env.PATH, even an empty one), else
// defaultPATH. Every command the driver starts gets this rule: execute,
// post-upload commands, duplex channels and login terminals.
func commandPATH(dirs []string, env map[string]string) string {
	base, ok := env["PATH"]
	if !ok {
		base = defaultPATH
	}
	if len(dirs) == 0 {
		return base
	}
	if base == "" { // no trailing ':', which would search the cwd
		return strings.Join(dirs, ":")
	}
	return strings.Join(dirs, ":") + ":" + base
}

// buildEnv is the whole environment of a command of the lease marked
// marker: PATH (commandPATH of dirs and env), the marker (proctree.MarkerVar), then
// the explicit env, which envrule.Check has accepted. Nothing is inherited
// from the worker.
func buildEnv(env map[string]string, marker string, dirs []string) []string {
	out := []string{"PATH=" + commandPATH(dirs, env), proctree.MarkerVar + "=" + marker}
	keys := make([]string, 0, len(env))
	for k := range env {
		if k != "PATH" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// stageStdin writes data to an unlinked temp file and returns it opened
// for reading: the command reads a real file, and nothing stays on disk.
func stageStdin(data string) (*os.File, error) {
	name := filepath.Join(os.TempDir(), "paperclip-fake-stdin-"+uuid.NewString())
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("stage stdin: %w", err)
	}
	_ = os.Remove(name)
	if _, err := io.WriteString(f, data); err != nil {
		f.Close()
		return nil, fmt.Errorf("stage stdin: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("stage stdin: %w", err)
	}
	return f, nil
}

func describeLookErr(err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return "command not found"
	case errors.Is(err, os.ErrPermission):
		return "permission denied (not an executable file)"
	}
	return unwrapPathErr(err).Error()
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
