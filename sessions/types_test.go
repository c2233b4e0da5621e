package sessions

import "testing"

func TestArgvProblem(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{nil, "it is empty"},
		{[]string{}, "it is empty"},
		{[]string{""}, "element 0 is empty"},
		{[]string{"printf", "%s", ""}, "element 2 is empty"},
		{[]string{"printf", "a\x00b"}, "element 1 contains a NUL character"},
		{[]string{"sh", "-c", "exec env A='$(id)' node x; echo \"*\""}, ""},
	} {
		if got := ArgvProblem(tc.argv); got != tc.want {
			t.Errorf("ArgvProblem(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

func TestValidSessionHome(t *testing.T) {
	for home, want := range map[string]bool{
		"/tmp/paperclip-adapter-login/0b0e2c1a-4b2f-4c3d-8e9f-0a1b2c3d4e5f":   true,
		"/tmp/paperclip-adapter-login/0B0E2C1A-4B2F-4C3D-8E9F-0A1B2C3D4E5F":   false, // the host's are lowercase
		"/tmp/paperclip-adapter-login/0b0e2c1a-4b2f-0c3d-8e9f-0a1b2c3d4e5f":   false, // version 0
		"/tmp/paperclip-adapter-login/0b0e2c1a-4b2f-4c3d-7e9f-0a1b2c3d4e5f":   false, // not RFC 4122
		"/tmp/paperclip-adapter-login/../../etc":                              false,
		"/tmp/paperclip-adapter-login/0b0e2c1a-4b2f-4c3d-8e9f-0a1b2c3d4e5f/x": false,
		"/tmp/paperclip-adapter-login/0b0e2c1a-4b2f-4c3d-8e9f-0a1b2c3d4e5f\n": false,
		"tmp/paperclip-adapter-login/0b0e2c1a-4b2f-4c3d-8e9f-0a1b2c3d4e5f":    false,
	} {
		if got := ValidSessionHome(home); got != want {
			t.Errorf("ValidSessionHome(%q) = %v, want %v", home, got, want)
		}
	}
}
