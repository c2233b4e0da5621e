package handlers

import (
	"bytes"
	"encoding/json"

	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// streamedOutput is the output size from which an execute result is
// written as it is encoded (rpc.JSONParts) instead of encoded whole first:
// its 16 MiB tails would otherwise be in memory twice more (the encoded
// result and the reply line).
const streamedOutput = 1 << 20

// reply is what the worker answers for r: r itself, or for a large output
// the same JSON as rpc.JSONParts.
func (r *ExecuteResult) reply() (any, error) {
	if len(r.Stdout)+len(r.Stderr) < streamedOutput {
		return r, nil
	}
	head, err := encodeFields(`{"exitCode":`, r.ExitCode, `,"signal":`, r.Signal, `,"timedOut":`, r.TimedOut, `,"stdout":`)
	if err != nil {
		return nil, err
	}
	tail := []byte("}")
	if len(r.Metadata) > 0 { // omitempty, as encoding/json has it
		if tail, err = encodeFields(`,"metadata":`, r.Metadata, `}`); err != nil {
			return nil, err
		}
	}
	return rpc.JSONParts{
		rpc.RawPart(head), rpc.TextPart(r.Stdout),
		rpc.RawPart([]byte(`,"stderr":`)), rpc.TextPart(r.Stderr),
		rpc.RawPart(tail),
	}, nil
}

// encodeFields writes parts in order: a string as raw JSON text, anything
// else encoded as the reply's encoder does (no HTML escaping).
func encodeFields(parts ...any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, p := range parts {
		if s, ok := p.(string); ok {
			b.WriteString(s)
			continue
		}
		if err := enc.Encode(p); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	return b.Bytes(), nil
}
