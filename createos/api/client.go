package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/createos/deadline"
	"github.com/paperclip-sandbox/sandbox-plugin/createos/sched"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/uri"
)

// maxJSONBody bounds a JSON answer; the plugin reads only small objects.
const maxJSONBody = 16 << 20

// Client talks to one CreateOS origin with one key. Every request goes to
// ${origin}/v1${path}, carries X-Api-Key, refuses redirects and waits for
// its turn (pace.go).
type Client struct {
	origin  string
	key     string
	account sched.Account
	class   sched.Class  // of every request (Live, Ending)
	turn    *atomic.Bool // a turn the next send takes, unless used (Admit)
	shape   string
	// timeout bounds a sandbox delete made for cleanup.
	timeout time.Duration
	http    *http.Client
	pacer   sched.Pacer
	// poll is the transition polling interval.
	poll time.Duration
	// maxDownload bounds the bytes one file download writes.
	maxDownload int64
	// forkRetry spaces fork attempts that met a 409.
	forkRetry time.Duration
}

// Options configure a Client. Origin, Key and Shape are the environment's
// (an origin without a trailing /v1); a zero HTTP is http.DefaultClient
// (redirects are refused either way), a nil Pacer starts every request at
// once, and zero
// durations are the defaults: Poll and ForkRetry 250 ms.
type Options struct {
	Origin, Key, Shape string
	// Timeout bounds a sandbox delete made for cleanup (config.timeoutMs).
	Timeout     time.Duration
	HTTP        *http.Client
	Pacer       sched.Pacer
	Poll        time.Duration
	MaxDownload int64
	ForkRetry   time.Duration
	// PerMinute is the requests a minute the account allows (config.requestsPerMinute;
	// 0 for DefaultPerMinute).
	PerMinute int
}

// DefaultPoll is the transition polling interval.
const DefaultPoll = 250 * time.Millisecond

// New returns a client for o.
func New(o Options) *Client {
	c := &Client{
		origin: o.Origin, key: o.Key, class: sched.Work, shape: o.Shape, timeout: o.Timeout,
		http: noRedirects(o.HTTP), pacer: o.Pacer, poll: o.Poll,
		maxDownload: o.MaxDownload, forkRetry: o.ForkRetry,
	}
	c.account = sched.Account{ID: AccountID(o.Origin, c.KeyDigest()), PerMinute: o.PerMinute}
	if c.account.PerMinute <= 0 {
		c.account.PerMinute = DefaultPerMinute
	}
	if c.pacer == nil {
		c.pacer = noPacing{}
	}
	if c.poll <= 0 {
		c.poll = DefaultPoll
	}
	if c.forkRetry <= 0 {
		c.forkRetry = DefaultForkRetry
	}
	return c
}

// Origin is the API origin the client sends to.
func (c *Client) Origin() string { return c.origin }

// jsonUnmarshal decodes raw into v.
func jsonUnmarshal(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }

// errRedirect stops a redirect; it surfaces as a connection failure.
var errRedirect = errors.New("redirect refused")

// noRedirects returns a copy of hc that never follows a redirect: the key
// must not travel to another location.
func noRedirects(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return errRedirect }
	return &c
}

// request sends one request and returns a 2xx response, whose body the
// caller owns. Non-2xx answers become *APIError without reading the body;
// transport failures never mention the URL.
func (c *Client) request(ctx context.Context, method, path string, body []byte, contentType string) (*http.Response, error) {
	hdr := http.Header{}
	if contentType != "" {
		hdr.Set("Content-Type", contentType)
	}
	if body == nil {
		return c.send(ctx, method, path, reqBody{}, hdr)
	}
	return c.send(ctx, method, path, bytesBody(body), hdr)
}

// reqBody is a request body that every send reads from its start with a
// reader of its own: net/http may go on reading a send's body after
// RoundTrip returns (until it closes it), so a send made again after a
// rejection must share no reader, and no file offset, with the one before.
// The zero reqBody is none.
type reqBody struct {
	open func() io.Reader
	size int64
}

// bytesBody is b, which no send changes.
func bytesBody(b []byte) reqBody {
	return reqBody{open: func() io.Reader { return bytes.NewReader(b) }, size: int64(len(b))}
}

// fileBody is the first size bytes of f, read with ReadAt, which moves no
// offset that another send reads from.
func fileBody(f io.ReaderAt, size int64) reqBody {
	return reqBody{open: func() io.Reader { return io.NewSectionReader(f, 0, size) }, size: size}
}

// attach gives req a fresh reader of b, and GetBody for the sends the
// transport itself makes again. Closing a reader releases nothing: what it
// reads (a file) is the caller's to close.
func (b reqBody) attach(req *http.Request) {
	switch {
	case b.open == nil:
	case b.size == 0:
		req.Body = http.NoBody
	default:
		req.Body, req.ContentLength = io.NopCloser(b.open()), b.size
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(b.open()), nil }
	}
}

// send paces and sends one request with the headers hdr and body (streamed;
// reqBody{} for none), and turns a non-2xx status into an APIError without
// reading the body. A request that was never handed to the transport (the
// pacer or ctx refused it first, or it could not be built) fails with an
// *unsentError: it cannot have reached the provider.
//
// A rejection (429, or 503 with Retry-After) was not processed: the pacer
// is told, and the same request is sent again, body whole from its start,
// after Retry-After while that fits in ctx's deadline; past it, the error
// says the rate limit outlasted the call.
func (c *Client) send(ctx context.Context, method, path string, body reqBody, hdr http.Header) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, method, path, body, hdr)
		wait, rejected := Rejected(err)
		if !rejected {
			return resp, err
		}
		if err := GiveUp(ctx, err, attempt); err != nil {
			return nil, err
		}
		if err := Sleep(ctx, wait); err != nil {
			return nil, &unsentError{err}
		}
	}
}

// GiveUp decides whether the attempt-th rejection in a row (err) of a
// request for ctx ends it: the maxRejections-th does, and so does one
// whose wait does not fit in ctx's deadline. It returns the error that says
// which (nil: send again after the wait).
func GiveUp(ctx context.Context, err error, attempt int) error {
	var ae *APIError
	if !errors.As(err, &ae) || !ae.rejected {
		return err
	}
	if attempt < maxRejections && fitsDeadline(ctx, ae.retryAfter) {
		return nil
	}
	given := *ae
	given.outlasted, given.refused = true, attempt >= maxRejections
	return &given
}

// attempt is one send of a request, paced, whose answer the pacer is told
// of; a rejection is returned (Rejected reads it), never sent again. A
// caller that decides what to send anew after a rejection (a batch of
// commands whose calls may have ended meanwhile) loops on attempt itself.
func (c *Client) attempt(ctx context.Context, method, path string, body reqBody, hdr http.Header) (*http.Response, error) {
	resp, err := c.sendOnce(ctx, method, path, body, hdr)
	r, learns := c.pacer.(sched.Rejecter)
	if !learns {
		return resp, err
	}
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.rejected:
		r.Rejected(ctx, c.account, ae.retryAfter)
	case resp != nil || ae != nil: // the provider answered
		r.Accepted(ctx, c.account)
	}
	return resp, err
}

// Rejected reports whether err is a rejection (a 429, or a 503 with
// Retry-After: the request was not processed) and the wait it asks for.
func Rejected(err error) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.rejected {
		return ae.retryAfter, true
	}
	return 0, false
}

// maxRejections bounds the sends of one request the provider keeps
// refusing, whatever the deadline.
const maxRejections = 20

// fitsDeadline reports whether waiting d leaves ctx time to send again.
func fitsDeadline(ctx context.Context, d time.Duration) bool {
	end, ok := ctx.Deadline()
	return !ok || time.Until(end) > d
}

// sendOnce is one send of send's request.
func (c *Client) sendOnce(ctx context.Context, method, path string, body reqBody, hdr http.Header) (*http.Response, error) {
	if err := c.wait(ctx); err != nil {
		return nil, &unsentError{err}
	}
	if ctx.Err() != nil {
		return nil, &unsentError{context.Cause(ctx)}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.origin+"/v1"+path, nil)
	if err != nil {
		return nil, &unsentError{errConnection}
	}
	body.attach(req)
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("X-Api-Key", c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		// The cause is dropped on purpose: it names the URL.
		return nil, errConnection
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body.Close()
		return nil, statusError(resp, operationLabel(path))
	}
	return resp, nil
}

// operationLabel names the operation from the path alone (never the body);
// the first match wins.
func operationLabel(path string) string {
	switch {
	case strings.Contains(path, "/files?"):
		return "file transfer"
	case strings.Contains(path, "/stdin/close"):
		return "stdin close"
	case strings.Contains(path, "/connect?"):
		return "output connection"
	case strings.HasSuffix(path, "/processes"):
		return "process creation"
	case strings.Contains(path, "/processes/"):
		return "process cleanup"
	case strings.Contains(path, "/exec"):
		return "workspace command"
	}
	return "sandbox lifecycle"
}

// Object is a decoded JSON object whose values are decoded on use.
type Object map[string]json.RawMessage

// asObject decodes raw as a non-array JSON object.
func asObject(raw json.RawMessage) (Object, bool) {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	var o Object
	if json.Unmarshal(t, &o) != nil {
		return nil, false
	}
	return o, true
}

// Str returns the string value of key.
func (o Object) Str(key string) (string, bool) {
	var s string
	raw, ok := o[key]
	if !ok || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// num returns the number value of key.
func (o Object) num(key string) (float64, bool) {
	raw, ok := o[key]
	if !ok {
		return 0, false
	}
	var f float64
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || !(t[0] == '-' || t[0] >= '0' && t[0] <= '9') || json.Unmarshal(t, &f) != nil {
		return 0, false
	}
	return f, true
}

// IsTrue reports whether key is the JSON literal true.
func (o Object) IsTrue(key string) bool {
	return string(bytes.TrimSpace(o[key])) == "true"
}

// jsonBytes is body as JSON.
func jsonBytes(body any) ([]byte, error) { return json.Marshal(body) }

// JSON sends body (if not nil) as JSON and returns the data of a JSend
// success envelope.
func (c *Client) JSON(ctx context.Context, method, path string, body any) (Object, error) {
	var buf []byte
	ct := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		buf, ct = b, "application/json"
	}
	resp, err := c.request(ctx, method, path, buf, ct)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody))
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, errInvalidJSON
	}
	env, ok := asObject(raw)
	if !ok {
		return nil, errInvalidJSON
	}
	if status, _ := env.Str("status"); status != "success" {
		return nil, errUnsuccessful
	}
	data, ok := asObject(env["data"])
	if !ok {
		return nil, errInvalidResponse
	}
	return data, nil
}

var IDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

// CheckID checks a sandbox, process or lease id before it is used in a
// path.
func CheckID(s string) (string, error) {
	if !IDPattern.MatchString(s) {
		return "", errInvalidID
	}
	return s, nil
}

// Status returns the sandbox's status.
func (c *Client) Status(ctx context.Context, id string) (string, error) {
	if _, err := CheckID(id); err != nil {
		return "", err
	}
	data, err := c.JSON(ctx, http.MethodGet, "/sandboxes/"+id, nil)
	if err != nil {
		return "", err
	}
	got, okID := data.Str("id")
	status, okStatus := data.Str("status")
	if !okID || got != id || !okStatus {
		return "", errSandboxIdentity
	}
	return status, nil
}

// Destroy deletes the sandbox under a fresh deadline (cut to what is
// left of the call's budget); 404 counts as done.
func (c *Client) Destroy(ctx context.Context, id string) error {
	if _, err := CheckID(id); err != nil {
		return err
	}
	ctx, cancel := deadline.Cleanup(ctx, c.timeout)
	defer cancel()
	if _, err := c.JSON(ctx, http.MethodDelete, "/sandboxes/"+id, nil); err != nil && !IsStatus(err, http.StatusNotFound) {
		return err
	}
	return nil
}

// Transition brings the sandbox to desired ("running" or "paused"),
// submitting the action until the provider takes it (once, unless it
// answers 409) and polling until the state is reached, under ctx's
// deadline.
func (c *Client) Transition(ctx context.Context, id, desired string) error {
	return c.Reach(ctx, id, desired, "")
}

// Reach is transition from a state already known (known; "" for none): a
// row just read, created or forked needs no second read, and an action
// whose answer shows the desired state needs no poll.
func (c *Client) Reach(ctx context.Context, id, desired, known string) error {
	submitted := false
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		status := known
		if known = ""; status == "" {
			var err error
			if status, err = c.Status(ctx, id); err != nil {
				return err
			}
		}
		if status == desired {
			return nil
		}
		canSubmit := desired == "running" && (status == "paused" || status == "error") || desired == "paused" && status == "running"
		switch {
		case canSubmit && !submitted:
			answered, taken, err := c.submit(ctx, id, desired)
			if err != nil {
				return err
			}
			submitted = taken
			if answered == desired {
				return nil
			}
		case !canSubmit && !slices.Contains(waitingStates, status):
			return errDidNotReach(desired, status)
		}
		if err := Sleep(ctx, c.poll); err != nil {
			return err
		}
	}
}

// waitingStates are the transitional states a transition waits through.
var waitingStates = []string{"creating", "pausing", "resuming", "forking"}

// submit posts the pause or resume that leads to desired and returns the
// state its answer shows ("" when none) and whether the provider took the
// action. A 409 (a concurrent transition) is not taken: the next pass
// reads the state again and, if the action still applies, resends it.
func (c *Client) submit(ctx context.Context, id, desired string) (answered string, taken bool, err error) {
	action := "pause"
	if desired == "running" {
		action = "resume"
	}
	data, err := c.JSON(ctx, http.MethodPost, "/sandboxes/"+id+"/"+action, nil)
	if IsStatus(err, http.StatusConflict) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	status, _ := data.Str("status")
	return status, true, nil
}

// Sleep waits d, or until ctx ends (its cause).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Upload writes content to the absolute guest path (the provider creates
// missing parents).
func (c *Client) Upload(ctx context.Context, id, path string, content []byte) error {
	if _, err := CheckID(id); err != nil {
		return err
	}
	if content == nil {
		content = []byte{}
	}
	resp, err := c.request(ctx, http.MethodPut, "/sandboxes/"+id+"/files?path="+uri.Component(path), content, "application/octet-stream")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// ExecResult is the part of an /exec answer the plugin reads.
type ExecResult struct {
	ExitCode float64
	HasCode  bool
	Stdout   string
	HasOut   bool
}

// Exec runs cmd with args to completion through /exec.
func (c *Client) Exec(ctx context.Context, id, cmd string, args ...string) (ExecResult, error) {
	var r ExecResult
	if _, err := CheckID(id); err != nil {
		return r, err
	}
	if args == nil {
		args = []string{}
	}
	data, err := c.JSON(ctx, http.MethodPost, "/sandboxes/"+id+"/exec", map[string]any{"cmd": cmd, "args": args})
	if err != nil {
		return r, err
	}
	res, ok := asObject(data["result"])
	if !ok {
		return r, errInvalidResponse
	}
	r.ExitCode, r.HasCode = res.num("exit_code")
	r.Stdout, r.HasOut = res.Str("stdout")
	return r, nil
}

// OK reports exit code 0.
func (r ExecResult) OK() bool { return r.HasCode && r.ExitCode == 0 }

// Sign is the hex HMAC-SHA256 of parts (joined by NUL) under the client's
// key: a binding only this account's key holder can make, for metadata
// that others can read (a setup's marker and its sandbox).
func (c *Client) Sign(parts ...string) string {
	m := hmac.New(sha256.New, []byte(c.key))
	m.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// KeyDigest is the hex SHA-256 of the client's key: what may name the
// caller's account where the key itself must not appear.
func (c *Client) KeyDigest() string {
	sum := sha256.Sum256([]byte(c.key))
	return hex.EncodeToString(sum[:])
}

// AccountID names an origin and key (the pacer's accounts, cleanup
// marks): the hex SHA-256 of both, the key as its digest.
func AccountID(origin, keyDigest string) string {
	b, _ := json.Marshal([]string{origin, keyDigest})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
