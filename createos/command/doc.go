// Package command runs ordinary commands in a CreateOS sandbox (a lease's
// executes, its probe, a sync's commands): each over one streaming exec
// that runs the launcher (createos/launch), alone or coalesced with its
// sandbox's other waiting commands into one request of the batch helper
// (createos/batch), or as a managed process on an origin without
// streaming exec. A Runner keeps what it learns (origins without
// streaming exec, sandboxes where the helper cannot start) and owns the
// batch requests in flight until Close. Its errors say when a managed
// process may be left running; the caller then keeps the lease from reuse.
package command
