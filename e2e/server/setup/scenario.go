package setup

import "context"

// Scenario is one check through the shared set-up: its name (what -run
// matches), what it checks, and the function that runs it, which keeps
// its own state. A make chaos scenario needs the fault set-up (Faults); a
// closing scenario runs after the others of its kind whenever one of them
// runs (make chaos's end-of-table checks).
type Scenario struct {
	Name, Desc string
	Run        func(ctx context.Context, e *Env) error
	Faults     bool
	Closing    bool
}
