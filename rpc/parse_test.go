package rpc

import (
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		line    string
		method  string // served: the inbound's method ("" with code 0: skipped)
		code    int    // rejected: the error code
		id      string // the rejection's id ("" for null)
		message string // a part of the rejection's message
	}{
		{line: "  \r", code: 0},
		{line: `{"jsonrpc":"2.0","id":1,"result":true}`, code: 0},
		{line: `{"jsonrpc":"2.0","method":"log"}`, method: "log"},
		{line: `{"jsonrpc":"2.0","id":"a","method":"health","params":null}`, method: "health"},
		{line: `{"jsonrpc":"2.0","id":7,"method":"m","paperclipInvocation":{"id":"i","scope":{"companyId":"c"}}}`, method: "m"},
		{line: `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, code: CodeInvalidRequest, message: "batch requests"},
		{line: `42`, code: CodeInvalidRequest, message: "must be a JSON object"},
		{line: `{"jsonrpc":"2.0",`, code: CodeParseError},
		{line: `nope`, code: CodeParseError},
		{line: `{"jsonrpc":"1.0","id":3,"method":"m"}`, code: CodeInvalidRequest, id: "3", message: `"jsonrpc" must be "2.0"`},
		{line: `{"jsonrpc":"2.0","id":3,"method":"m","result":1}`, code: CodeInvalidRequest, id: "3", message: "both method and result"},
		{line: `{"jsonrpc":"2.0","id":3,"method":5}`, code: CodeInvalidRequest, id: "3", message: `"method" must be a string`},
		{line: `{"jsonrpc":"2.0","id":3,"method":null}`, code: CodeInvalidRequest, id: "3", message: `"method" must be a string`},
		{line: `{"jsonrpc":"2.0","id":{"x":1},"method":"m"}`, code: CodeInvalidRequest, message: `"id" must be a string or a number`},
		{line: `{"jsonrpc":"2.0","id":"p","method":"m","params":[1]}`, code: CodeInvalidParams, id: `"p"`},
		{line: `{"jsonrpc":"2.0","id":4,"method":"m","paperclipInvocation":"x"}`, code: CodeInvalidRequest, id: "4", message: "paperclipInvocation"},
		// An id with a raw 0xFF byte is not echoed.
		{line: "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"m\"}", code: CodeParseError, message: "not valid UTF-8 (first invalid byte at offset 24)"},
	}
	for _, tc := range tests {
		in, r := parseLine([]byte(tc.line))
		switch {
		case tc.code != 0:
			if in != nil || r == nil || r.code != tc.code || string(r.id) != tc.id || !strings.Contains(r.message, tc.message) {
				t.Errorf("%s: got %+v, %+v; want code %d id %q message ~%q", tc.line, in, r, tc.code, tc.id, tc.message)
			}
		case tc.method != "":
			if r != nil || in == nil || in.method != tc.method {
				t.Errorf("%s: got %+v, %+v; want method %q", tc.line, in, r, tc.method)
			}
		default:
			if in != nil || r != nil {
				t.Errorf("%s: got %+v, %+v; want it skipped", tc.line, in, r)
			}
		}
	}
	// Keys are exact: "ID" is not the id, so this is a
	// notification, as the host's JSON.parse would read it.
	if in, r := parseLine([]byte(`{"jsonrpc":"2.0","ID":1,"Method":"x","method":"m"}`)); r != nil || in == nil || in.id != nil || in.method != "m" {
		t.Errorf("case-folded keys: got %+v, %+v; want the notification m", in, r)
	}
	in, _ := parseLine([]byte(tests[4].line))
	if in.invocation == nil || in.invocation.ID != "i" || in.invocation.Scope.CompanyID != "c" || string(in.id) != "7" {
		t.Errorf("invocation request = %+v", in)
	}
}
