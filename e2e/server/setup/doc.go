// Package setup is the shared set-up of make server-e2e and make chaos:
// one Env that brings up the registry, createos-sim, the Paperclip server,
// the plugin installed by name with the recorder before its worker, and the
// fake-plugin and createos environments; the checks every scenario uses
// (a stub heartbeat from a HeartbeatSpec, leases, worker traces); and the
// end of a run: everything stopped, nothing left behind, the traffic kept.
package setup
