package rpc

import (
	"context"
	"encoding/json"
)

// Invocation is the host's per-call metadata (top-level
// "paperclipInvocation"). The worker treats it as opaque apart from its id,
// which it echoes on everything it sends while serving the call.
type Invocation struct {
	ID          string          `json:"id"`
	Scope       InvocationScope `json:"scope"`
	Traceparent string          `json:"traceparent,omitempty"`
	Raw         json.RawMessage `json:"-"`
}

// InvocationScope names the company a call acts for.
type InvocationScope struct {
	CompanyID string `json:"companyId"`
}

type invocationKey struct{}

// WithInvocation returns ctx carrying inv.
func WithInvocation(ctx context.Context, inv *Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the invocation of the request ctx serves, or nil.
func InvocationFrom(ctx context.Context) *Invocation {
	inv, _ := ctx.Value(invocationKey{}).(*Invocation)
	return inv
}

// InvocationID returns the invocation id of the request ctx serves, or "".
func InvocationID(ctx context.Context) string {
	if inv := InvocationFrom(ctx); inv != nil {
		return inv.ID
	}
	return ""
}
