// Package sessions is the worker's live-session route table: every duplex
// channel and login pseudo-terminal, whichever driver runs it. It serves
// the duplexChannel* and loginPty* methods behind the plugin surface
// (handlers), owns their wire types, and defines what a driver implements
// to run sessions (DuplexOpener, LoginPtyOpener, Channel, ChannelSink).
package sessions
