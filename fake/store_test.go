package fake

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateExecutionID(t *testing.T) {
	cases := []struct {
		id   string
		want error
	}{
		{"", errExecutionIDInvalid},
		{"a", nil},
		{strings.Repeat("x", 512), nil},
		{strings.Repeat("x", 513), errExecutionIDTooLong},
		{strings.Repeat("😀", 256), nil}, // 512 UTF-16 units
		{strings.Repeat("😀", 256) + "x", errExecutionIDTooLong},
	}
	for _, tc := range cases {
		if got := validateExecutionID(tc.id); !errors.Is(got, tc.want) {
			t.Errorf("validateExecutionID(len %d) = %v, want %v", len(tc.id), got, tc.want)
		}
	}
}

func TestExecutionsRegistry(t *testing.T) {
	r := newExecutions[int]()
	k := executionKey{"c", "e", "l", "x"}
	if err := r.Register(k, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(k, 2); err == nil || err.Error() != `Environment execution "x" is already active.` {
		t.Fatalf("duplicate: %v", err)
	}
	other := k
	other.CompanyID = "c2"
	if _, ok := r.Lookup(other); ok {
		t.Fatal("lookup ignored the company")
	}
	r.Unregister(k, func(v int) bool { return v == 2 }) // not its own entry
	if _, ok := r.Lookup(k); !ok {
		t.Fatal("foreign unregister removed the entry")
	}
	r.Unregister(k, func(v int) bool { return v == 1 })
	if r.Len() != 0 {
		t.Fatal("entry not removed")
	}
}

func TestSetupsStore(t *testing.T) {
	s := newSetupStore()
	c := scope{CompanyID: "c", EnvironmentID: "e"}
	first := s.StartSession(c, setupRecord{ProviderLeaseID: "id", Status: "waiting_for_user"})
	again := s.StartSession(c, setupRecord{ProviderLeaseID: "id", Status: "starting"})
	if first.Status != again.Status {
		t.Fatal("start replaced an existing session")
	}
	if _, found, _ := s.UpdateSession(c, "nope", func(*setupRecord) error { return nil }); found {
		t.Fatal("update found an unknown session")
	}
	s.PutTemplate("c", templateRecord{Ref: "r"})
	if !s.DeleteTemplate("c", "r") || s.DeleteTemplate("c", "r") || s.DeleteTemplate("c", "unknown") {
		t.Fatal("soft delete semantics")
	}
	if tmpl, ok := s.Template("c", "r"); !ok || !tmpl.Deleted {
		t.Fatal("deleted template record not kept")
	}
}

// A session or template of one scope does not exist for
// another, whatever id it names.
func TestSetupsAreScoped(t *testing.T) {
	s := newSetupStore()
	own := scope{CompanyID: "c", EnvironmentID: "e"}
	s.StartSession(own, setupRecord{ProviderLeaseID: "id", Status: "waiting_for_user"})
	s.PutTemplate("c", templateRecord{Ref: "r"})
	for _, other := range []scope{{"evil", "e"}, {"c", "other"}, {"evil", "other"}} {
		if _, ok := s.Session(other, "id"); ok {
			t.Errorf("%+v sees c's session", other)
		}
		if _, found, _ := s.UpdateSession(other, "id", func(v *setupRecord) error { v.Status = "cancelled"; return nil }); found {
			t.Errorf("%+v updated c's session", other)
		}
		if got := s.StartSession(other, setupRecord{ProviderLeaseID: "id", Status: "starting"}); got.Status != "starting" {
			t.Errorf("%+v starting the same id got c's session %+v", other, got)
		}
	}
	if v, _ := s.Session(own, "id"); v.Status != "waiting_for_user" {
		t.Errorf("c's session changed: %+v", v)
	}
	if s.DeleteTemplate("evil", "r") {
		t.Error("another company deleted c's template")
	}
	if _, ok := s.Template("evil", "r"); ok {
		t.Error("another company sees c's template")
	}
	if tmpl, _ := s.Template("c", "r"); tmpl.Deleted {
		t.Error("c's template was deleted by another company")
	}
}
