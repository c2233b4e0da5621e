package state

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
		{"", ErrExecutionIDInvalid},
		{"a", nil},
		{strings.Repeat("x", 512), nil},
		{strings.Repeat("x", 513), ErrExecutionIDTooLong},
		{strings.Repeat("😀", 256), nil}, // 512 UTF-16 units
		{strings.Repeat("😀", 256) + "x", ErrExecutionIDTooLong},
	}
	for _, tc := range cases {
		if got := ValidateExecutionID(tc.id); !errors.Is(got, tc.want) {
			t.Errorf("ValidateExecutionID(len %d) = %v, want %v", len(tc.id), got, tc.want)
		}
	}
}

func TestExecutionsRegistry(t *testing.T) {
	r := NewExecutions[int]()
	k := ExecKey{"c", "e", "l", "x"}
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
	s := NewSetups()
	first := s.StartSession(SetupSession{ProviderLeaseID: "id", Status: "waiting_for_user"})
	again := s.StartSession(SetupSession{ProviderLeaseID: "id", Status: "starting"})
	if first.Status != again.Status {
		t.Fatal("start replaced an existing session")
	}
	if _, found, _ := s.UpdateSession("nope", func(*SetupSession) error { return nil }); found {
		t.Fatal("update found an unknown session")
	}
	s.PutTemplate(Template{Ref: "r"})
	if !s.DeleteTemplate("r") || s.DeleteTemplate("r") || s.DeleteTemplate("unknown") {
		t.Fatal("soft delete semantics")
	}
	if tmpl, ok := s.Template("r"); !ok || !tmpl.Deleted {
		t.Fatal("deleted template record not kept")
	}
}
