package api

import "testing"

// The wait answer as the v0.3 reference reads it (recoverProcessExit).
func TestRecoveredExitOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   string
		cursor int64
		code   *int
		signal *string
		newest int64
		err    error
	}{
		{"the fixture's answer", `{"state":"exited","tree_exited":true,"exit_code":0,"signal":"","output":{"newest_seq":1}}`, 1, ptr(0), nil, 1, nil},
		{"a signal", `{"exit_code":null,"signal":"SIGKILL","output":{"newest_seq":4}}`, 2, nil, ptr("SIGKILL"), 4, nil},
		{"code and signal", `{"exit_code":143,"signal":"SIGTERM","output":{"newest_seq":0}}`, 0, ptr(143), ptr("SIGTERM"), 0, nil},
		{"no output", `{"exit_code":0}`, 0, nil, nil, 0, errInvalidResponse},
		{"output not an object", `{"exit_code":0,"output":[1]}`, 0, nil, nil, 0, errInvalidResponse},
		{"no newest_seq", `{"exit_code":0,"output":{}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq a string", `{"exit_code":0,"output":{"newest_seq":"1"}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq fractional", `{"exit_code":0,"output":{"newest_seq":1.5}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq unsafe", `{"exit_code":0,"output":{"newest_seq":9007199254740992}}`, 0, nil, nil, 0, errJournalInvalid},
		{"newest_seq behind the cursor", `{"exit_code":0,"output":{"newest_seq":2}}`, 3, nil, nil, 0, errJournalInvalid},
		{"no exit", `{"exit_code":null,"signal":"","output":{"newest_seq":1}}`, 1, nil, nil, 0, errExitMissing},
		{"a signal that is not one", `{"signal":"TERM","output":{"newest_seq":1}}`, 1, nil, nil, 0, errExitMissing},
		{"a fractional code", `{"exit_code":1.5,"output":{"newest_seq":1}}`, 1, nil, nil, 0, errExitMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := asObject([]byte(tc.data))
			if !ok {
				t.Fatal("bad fixture")
			}
			rec, err := recoveredExitOf(o, tc.cursor)
			if err != tc.err {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if !equalPtr(rec.exit.Code, tc.code) || !equalPtr(rec.exit.Signal, tc.signal) || rec.newestSeq != tc.newest {
				t.Errorf("%+v (code %v, signal %v)", rec, deref(rec.exit.Code), deref(rec.exit.Signal))
			}
		})
	}
}

func equalPtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func TestCanonicalBase64(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "YQ==": true, "YWI=": true, "YWJj": true, "YWJjZA==": true, "+/+/": true,
		"YQ": false, "YQ=": false, "Y===": false, "=YWI": false, "YW=j": false, "YQ==YQ==": false, "YW J": false, "YQ-_": false, "====": false,
	} {
		if got := canonicalBase64(s); got != want {
			t.Errorf("%q: %v", s, got)
		}
	}
}
