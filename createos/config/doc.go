// Package config reads a CreateOS environment config once, where a call
// enters the driver: Parse checks the raw object with the reference
// plugin's rules and messages into a Config, which gives what a lease asks
// for (EffectiveRootfs, EffectiveAutoPause, EffectiveEgress), the key to
// send (ResolveAPIKey) and the config as validation returns it
// (Normalized). HostBudget is how long the host waits for a call, worked
// out from the raw config as the host does; TimeoutMs holds the host's
// rules for a timeout it sends.
package config
