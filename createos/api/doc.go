// Package api is the CreateOS HTTP API client the createos driver talks to
// the provider through: requests to ${origin}/v1 with the X-Api-Key header
// and no redirects, every one paced per origin (Pacer; Urgent for the ones
// that end a session), JSend envelopes decoded into Objects, the sandbox
// control plane (create, fork, get, list, transitions, egress, files, exec),
// the NDJSON process streams (ExecStream, Follower) and the errors an
// operator reads: APIError for a non-2xx answer, which names the status and
// an operation chosen from the path, never the body or the URL.
package api
