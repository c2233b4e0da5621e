package rpc

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/hostjson"
)

// envelope is the first, shallow read of an incoming line. Raw fields keep
// ids and params byte-exact; nil means the member is absent.
type envelope struct {
	JSONRPC    json.RawMessage `json:"jsonrpc"`
	ID         json.RawMessage `json:"id"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params"`
	Result     json.RawMessage `json:"result"`
	Error      json.RawMessage `json:"error"`
	Invocation json.RawMessage `json:"paperclipInvocation"`
}

// readEnvelope reads the envelope of a line that starts with '{'. Errors
// are encoding/json's, so a syntax error is a *json.SyntaxError.
//
// Keys match exactly, as the host's JSON.parse reads them ("ID" is not
// "id"), and the last duplicate wins. A valid line whose keys are plain
// ASCII without escapes (every line the host sends) is split by scan, with
// no decoding and no copies: the raw members are slices of line. Any other
// valid line goes to hostjson.Unmarshal, which gives the same members.
func readEnvelope(line []byte) (envelope, error) {
	var env envelope
	if !json.Valid(line) {
		return env, json.Unmarshal(line, &env) // the syntax error
	}
	if env.scan(line) {
		return env, nil
	}
	env = envelope{}
	err := hostjson.Unmarshal(line, &env)
	return env, err
}

// scan splits a valid JSON object into its top-level members. It reports
// false, leaving env partly filled, for a key that is not plain ASCII or
// has an escape (which only decoding can compare). Keys match exactly and
// the last duplicate wins.
func (env *envelope) scan(b []byte) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		// A key: b[i] is '"'.
		start := i + 1
		j := start
		for j < len(b) && b[j] != '"' {
			if b[j] == '\\' || b[j] >= utf8.RuneSelf {
				return false
			}
			j++
		}
		key := b[start:j]
		i = skipSpace(b, j+1) // at ':'
		i = skipSpace(b, i+1)
		end := skipValue(b, i)
		if f := env.field(key); f != nil {
			*f = b[i:end]
		}
		i = skipSpace(b, end) // at ',' or '}'
		if i >= len(b) || b[i] == '}' {
			return true
		}
		i = skipSpace(b, i+1)
	}
	return true
}

// field is the member key names.
func (env *envelope) field(key []byte) *json.RawMessage {
	switch string(key) {
	case "jsonrpc":
		return &env.JSONRPC
	case "id":
		return &env.ID
	case "method":
		return &env.Method
	case "params":
		return &env.Params
	case "result":
		return &env.Result
	case "error":
		return &env.Error
	case "paperclipInvocation":
		return &env.Invocation
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of a scalar, at its container's close
			}
			depth--
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
		if depth == 0 && (b[i-1] == '"' || b[i-1] == '}' || b[i-1] == ']') {
			return i
		}
	}
	return i
}

// jsonString decodes raw as a JSON string. ok is false when raw is absent
// or not a string (null included: the host's typeof check refuses it too).
func jsonString(raw json.RawMessage) (s string, ok bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		plain := true
		for _, c := range raw[1 : n-1] {
			if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				plain = false
				break
			}
		}
		if plain {
			return string(raw[1 : n-1]), true
		}
	}
	return s, json.Unmarshal(raw, &s) == nil
}
