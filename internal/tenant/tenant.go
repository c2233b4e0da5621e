// Package tenant carries whom a request is made for — the host's company
// and the provider lease — in a context, so that a shared resource (the
// scheduler of a CreateOS account's requests) can give them turns without
// every layer passing them down.
package tenant

import "context"

// Tenant is the company and the provider lease a call is made for; either
// may be empty (an acquire has no lease yet, a validation no company).
type Tenant struct {
	Company string
	Lease   string
}

type key struct{}

// With returns ctx carrying t.
func With(ctx context.Context, t Tenant) context.Context {
	return context.WithValue(ctx, key{}, t)
}

// Of is the tenant ctx carries, or the zero Tenant.
func Of(ctx context.Context) Tenant {
	t, _ := ctx.Value(key{}).(Tenant)
	return t
}
