package createostest

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
)

// JSend envelopes, as the CreateOS control plane answers.

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func success(w http.ResponseWriter, status int, data any) {
	writeJSON(w, status, map[string]any{"status": "success", "data": data})
}

// fail answers a client-side failure; data may be any text (the driver
// must never surface it).
func fail(w http.ResponseWriter, status int, data any) {
	writeJSON(w, status, map[string]any{"status": "fail", "data": data})
}

// serverError answers a server fault.
func serverError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"status": "error", "message": msg, "code": status})
}

// failStatus answers an injected or routine non-2xx status with the
// envelope the provider uses for it.
func failStatus(w http.ResponseWriter, status int, body string) {
	if body == "" {
		body = http.StatusText(status)
	}
	if status == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	if status >= 500 {
		serverError(w, status, body)
		return
	}
	fail(w, status, body)
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 8<<20))
	return dec.Decode(v)
}

func listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

func queryInt(r *http.Request, key string, def int) (int, bool) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
