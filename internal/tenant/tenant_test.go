package tenant

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWithOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want Tenant
	}{
		{"none", context.Background(), Tenant{}},
		{"set", With(context.Background(), Tenant{Company: "c", Lease: "l"}), Tenant{Company: "c", Lease: "l"}},
		{"innermost wins", With(With(context.Background(), Tenant{Company: "a"}), Tenant{Company: "b", Lease: "x"}), Tenant{Company: "b", Lease: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.ctx); got != tc.want {
				t.Fatalf("Of = %+v, want %+v", got, tc.want)
			}
		})
	}
}
