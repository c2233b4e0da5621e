// Package rpc is both ends of the Paperclip plugin wire: newline-delimited
// JSON-RPC 2.0 over a pair of byte streams.
//
// Server is the worker's end. It reads lines itself and serves a request on
// the reader while nothing else is in flight, on a goroutine of its own
// otherwise; an Admitter takes some requests in on the reader, in arrival
// order. When the session ends (the stop method, Serve's context, a failed
// read or write, or the input's end followed by at most InputGrace), what
// is in flight is cancelled and gets StopGrace to answer. codeFor turns an
// error into the reply's code and message: an *Error keeps its own, an
// Operator's text goes as -32002, a cancelled or timed-out request gets a
// fixed sentence, anything else InternalMessage (and the error is logged).
// Notifier, ExecuteLog and LogSink send notifications.
//
// Client is the host's end: it starts a worker process (StartClient) or
// speaks over given streams (NewClient), calls it with the host's default
// deadline, stops it as the host does, and serves worker→host requests.
// Package rpctest builds tests on both.
//
// It knows the host's envelope (paperclipInvocation, its error codes and
// limits), initialize, shutdown and the log and execute.log notifications;
// nothing about sandboxes.
package rpc
