package createostest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// JSend envelopes, as the CreateOS control plane answers, and the errors
// handlers answer with (see handler in routes.go).

// apiError is a non-2xx answer: a fail envelope carrying data, or for a
// status of 500 and more an error envelope carrying it as the message.
// data may be any text: the driver must never surface it.
type apiError struct {
	status int
	data   any
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %v", e.status, e.data) }

func failure(status int, data any) error { return &apiError{status: status, data: data} }

// conflict is the 409 of a sandbox in the wrong state.
func conflict(state string) error { return failure(http.StatusConflict, "sandbox is "+state) }

var (
	errSandboxNotFound = failure(http.StatusNotFound, "sandbox not found")
	errProcessNotFound = failure(http.StatusNotFound, "process not found")
	errInvalidJSON     = failure(http.StatusBadRequest, "invalid JSON body")
	// errAbort makes the handler abort the connection (a cut stream).
	errAbort = errors.New("abort the connection")
)

// answer writes a handler's error: nothing for nil, an aborted connection
// for errAbort, the envelope of an *apiError, and any other error as a 500.
func answer(w http.ResponseWriter, err error) {
	var e *apiError
	switch {
	case err == nil:
		return
	case errors.Is(err, errAbort):
		panic(http.ErrAbortHandler)
	case !errors.As(err, &e):
		e = &apiError{status: http.StatusInternalServerError, data: err.Error()}
	}
	if e.status >= 500 {
		writeJSON(w, e.status, map[string]any{"status": "error", "message": fmt.Sprint(e.data), "code": e.status})
		return
	}
	writeJSON(w, e.status, map[string]any{"status": "fail", "data": e.data})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// success answers a success envelope; it returns nil for the handler to
// return.
func success(w http.ResponseWriter, status int, data any) error {
	writeJSON(w, status, map[string]any{"status": "success", "data": data})
	return nil
}

// ok is the empty success.
func ok(w http.ResponseWriter) error { return success(w, http.StatusOK, map[string]any{}) }

// MaxRequestBody is the largest JSON body the server reads; a larger one
// is answered 400, as the provider refuses it (api.MaxRequestBody is the
// driver's copy of the figure).
const MaxRequestBody = 8 << 20

// decode reads a JSON body into v; a body that is not is errInvalidJSON.
func decode(r *http.Request, v any) error {
	if json.NewDecoder(http.MaxBytesReader(nil, r.Body, MaxRequestBody)).Decode(v) != nil {
		return errInvalidJSON
	}
	return nil
}

// queryInt reads a non-negative integer query parameter (def when absent).
func queryInt(r *http.Request, key string, def int) (int, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, failure(http.StatusBadRequest, map[string]any{key: "must be a non-negative integer"})
	}
	return n, nil
}
