package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/operator"
)

// APIError is a non-2xx answer. The body is never read: provider bodies may
// echo credentials or command input.
type APIError struct {
	Status int
	// Label is chosen from the request path only.
	Label string

	// rejected is a rate-limit answer (429, or 503 with Retry-After): the
	// request was not processed and may be sent again after retryAfter.
	rejected   bool
	retryAfter time.Duration
	// outlasted is a rejection given up on: the wait it asked for did not
	// fit in the call's deadline, or (refused) it was the maxRejections-th
	// in a row.
	outlasted, refused bool
}

func (e *APIError) Error() string {
	switch {
	case e.outlasted && e.refused:
		return fmt.Sprintf("CreateOS rate limit (HTTP %d) during %s outlasted the call: the provider refused it %d times in a row. Retry later; if other clients share this API key or address, lower requestsPerMinute.", e.Status, e.Label, maxRejections)
	case e.outlasted:
		return fmt.Sprintf("CreateOS rate limit (HTTP %d) during %s outlasted the call: the provider asked to wait longer than the call had left. Retry later; if other clients share this API key or address, lower requestsPerMinute.", e.Status, e.Label)
	}
	return fmt.Sprintf("CreateOS request failed (HTTP %d) during %s.", e.Status, e.Label) + statusAdvice(e.Status)
}

// statusAdvice is what an operator can do about a status: the key for
// 401 and 403, waiting for a provider error; nothing it could act on for
// the rest.
func statusAdvice(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return " CreateOS did not accept the API key: check the environment's API key, which must be a key of the account that API URL serves."
	case status == http.StatusForbidden:
		return " The API key may not do this: check the key's access and the environment's region."
	case status >= 500:
		return " The provider had a problem: retry later."
	}
	return ""
}

// defaultRetryAfter is the wait after a 429 that names none.
const defaultRetryAfter = time.Second

// statusError is the APIError of a non-2xx answer: a 429, and a 503 that
// carries Retry-After, are rejections, with the wait they ask for.
func statusError(resp *http.Response, label string) *APIError {
	e := &APIError{Status: resp.StatusCode, Label: label}
	ra, hasRA := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		e.rejected, e.retryAfter = true, defaultRetryAfter
		if hasRA {
			e.retryAfter = ra
		}
	case resp.StatusCode == http.StatusServiceUnavailable && hasRA:
		e.rejected, e.retryAfter = true, ra
	}
	return e
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 10.2.3), never negative.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// OperatorMessage marks the text as written for operators: it holds only
// the status and a label chosen from the request path.
func (e *APIError) OperatorMessage() string { return e.Error() }

// IsStatus reports whether err is an APIError with one of the statuses.
func IsStatus(err error, statuses ...int) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, s := range statuses {
		if ae.Status == s {
			return true
		}
	}
	return false
}

// unsentError is a request that was never handed to the transport: the
// pacer or its context refused it first. Nothing of it reached the
// provider. Its text and what it matches are its cause's.
type unsentError struct{ cause error }

func (e *unsentError) Error() string { return e.cause.Error() }
func (e *unsentError) Unwrap() error { return e.cause }

// MayHaveCreated reports whether a creation request that answered err may
// have created something all the same: unless it was never sent, or the
// provider refused it (an HTTP status below 500, or a rate-limit rejection,
// which was not processed), it may have.
func MayHaveCreated(err error) bool {
	var unsent *unsentError
	var ae *APIError
	switch {
	case err == nil:
		return true
	case errors.As(err, &unsent):
		return false
	case errors.As(err, &ae):
		return ae.Status >= 500 && !ae.rejected
	}
	return true
}

// The provider's answers the client refuses, in the reference plugin's
// words.
var (
	errConnection          = operator.New("CreateOS connection failed.")
	errInvalidJSON         = operator.New("CreateOS returned invalid JSON.")
	errUnsuccessful        = operator.New("CreateOS returned an unsuccessful response.")
	errInvalidResponse     = operator.New("CreateOS returned an invalid response.")
	errInvalidID           = operator.New("CreateOS returned an invalid resource ID.")
	errSandboxIdentity     = operator.New("CreateOS sandbox identity or state is invalid.")
	errFrameTooLarge       = operator.New("CreateOS process frame is too large.")
	errInvalidFrame        = operator.New("CreateOS returned an invalid process frame.")
	errEvicted             = operator.New("CreateOS process output was evicted before it could be read.")
	errOutputConnection    = operator.New("CreateOS process output connection failed.")
	errInvalidSeq          = operator.New("CreateOS process sequence is invalid.")
	errSeqGap              = operator.New("CreateOS process output has a sequence gap.")
	errInvalidOutput       = operator.New("CreateOS process output is invalid.")
	errExitMissing         = operator.New("CreateOS process exit status is missing.")
	errStreamError         = operator.New("CreateOS process stream reported an error.")
	errUnknownEvent        = operator.New("CreateOS returned an unknown process event.")
	errDownloadNoBody      = operator.New("CreateOS file download has no body.")
	errDownloadEncoded     = operator.New("CreateOS file download was content-encoded; only raw bytes are accepted.")
	errDownloadTooLarge    = operator.New("CreateOS file download exceeds the 11 GiB transfer limit.")
	errRootfsDefault       = operator.New("CreateOS rootfs catalog did not provide a valid default.")
	ErrCommandStreamError  = operator.New("CreateOS command stream reported an error.")
	ErrCommandStreamEvent  = operator.New("CreateOS returned an invalid command stream event.")
	ErrCommandStreamNoExit = operator.New("CreateOS command stream ended without an exit status.")
	errJournalInvalid      = operator.New("CreateOS process output journal is invalid.")
	errReplayIncomplete    = operator.New("CreateOS process stream ended before all output could be replayed.")
)

// errDidNotReach is the transition failure for desired (v0.3: with the
// state the provider reports).
func errDidNotReach(desired, status string) error {
	return operator.New("CreateOS sandbox did not reach " + desired + "; provider state is " + status + ".")
}
