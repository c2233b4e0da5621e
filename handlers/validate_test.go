package handlers

import (
	"encoding/json"
	"testing"
)

// Sync mappings are checked for shape only (syncrule.CheckShape): both
// paths present, a known kind. Paths, modes and confinement are the
// drivers'.
func TestSyncParamsShape(t *testing.T) {
	const base = `{"driverKey":"d","companyId":"c","environmentId":"e","config":{},"lease":{},"operations":[{"operationId":"o","files":[`
	for _, tc := range []struct{ name, files, want string }{
		{"ok", `{"sourcePath":"rel","targetPath":"rel","kind":"file","mode":4095}`, ""},
		{"no paths", `{"kind":"file"}`, `Invalid params: "operations[0].files[0].sourcePath", "operations[0].files[0].targetPath" are required.`},
		{"no target", `{"sourcePath":"/a","kind":"directory"},{"sourcePath":"/a","kind":"file"}`, `Invalid params: "operations[0].files[0].sourcePath", "operations[0].files[0].targetPath" are required.`},
		{"kind", `{"sourcePath":"/a","targetPath":"/b"},{"sourcePath":"/a","targetPath":"/b","kind":"link"}`, `Invalid params: "operations[0].files[0].kind" must be "file" or "directory".`},
		{"second mapping", `{"sourcePath":"/a","targetPath":"/b","kind":"file"},{"sourcePath":"/a","targetPath":"/b","kind":"link"}`, `Invalid params: "operations[0].files[1].kind" must be "file" or "directory".`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeParams(json.RawMessage(base+tc.files+`]}]}`), &SyncParams{})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("error %q, want %q", got, tc.want)
			}
		})
	}
}
