package command

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/api"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/output"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/handlers"
)

// Runner runs commands in sandboxes. Its exported fields are its
// configuration: set them before the first Run. Use NewRunner; end it
// with Close.
type Runner struct {
	// Coalesce is the coalescing mode: CoalesceAuto (also for any other
	// value), CoalesceOff or CoalesceAlways.
	Coalesce string
	// MaxCapture is how many UTF-16 units of each stream a result keeps.
	MaxCapture int
	// Reconnect is a managed process's wait between output reconnects,
	// and Replay its wait before replaying past an exit recovered through
	// wait.
	Reconnect, Replay time.Duration
	// NewID names a managed process's staged files.
	NewID func() string

	noStream     sync.Map           // origins that do not serve /exec?stream=true
	helperless   sync.Map           // sandboxes where the batch helper cannot start
	batches      sync.WaitGroup     // batch requests in flight and their kills
	closing      context.Context    // done once Close began: batch requests end
	closeBatches context.CancelFunc // ends closing
	waitMu       sync.Mutex
	waiting      map[*sched.Request]*job // jobs waiting for their turn (turn)
}

// NewRunner returns a Runner with the default configuration.
func NewRunner() *Runner {
	r := &Runner{
		Coalesce:   CoalesceAuto,
		MaxCapture: output.MaxCaptureUnits,
		Reconnect:  250 * time.Millisecond,
		Replay:     time.Second,
		NewID:      uuid.NewString,
		waiting:    map[*sched.Request]*job{},
	}
	r.closing, r.closeBatches = context.WithCancel(context.Background())
	return r
}

// Request is one command to run: Spec in sandbox Sandbox through Client,
// its output to Sink (which may be nil). The context given with it bounds
// the command (its deadline times it out); CleanupTimeout is the fresh
// deadline of a managed process's cleanup, cut to what is left of the
// context's budget (createos/deadline).
type Request struct {
	Client         *api.Client
	Sandbox        string
	Spec           Spec
	Sink           handlers.OutputSink
	CleanupTimeout time.Duration
}

// Spec is one command to run: Command with Args, in Cwd when it is set,
// with Env added, and with Stdin, when it is not nil, as its input.
type Spec struct {
	Command string
	Args    []string
	Cwd     string
	Env     map[string]string
	Stdin   *string
}

// Coalescing modes (Runner.Coalesce).
const (
	// CoalesceAuto batches a sandbox's executes when more than one waits.
	CoalesceAuto = "auto"
	// CoalesceOff sends every execute as a request of its own.
	CoalesceOff = "off"
	// CoalesceAlways sends every execute through the batch helper, even
	// one alone: the test suite runs in this mode as well as the default.
	CoalesceAlways = "always"
)

// mode is r's coalescing mode: CoalesceOff or CoalesceAlways when set
// so, else CoalesceAuto.
func (r *Runner) mode() string {
	if r.Coalesce == CoalesceOff || r.Coalesce == CoalesceAlways {
		return r.Coalesce
	}
	return CoalesceAuto
}
