// Package hostjson decodes JSON from the Paperclip host as the host itself
// reads it. The host is JavaScript: JSON.parse matches object keys exactly
// and keeps the last of duplicate keys. encoding/json (v1) matches keys
// case-insensitively, so {"companyId":"x","CompanyId":"c"} would decode
// as company c while the host reads x. Every decoding of host input that
// decides what a request means goes through Unmarshal.
package hostjson

import (
	"errors"
	"reflect"
	"strings"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// options: keys match exactly (the v2 default), duplicates are allowed and
// the last wins, and strings with lone surrogates (which JSON.parse
// accepts) decode with U+FFFD instead of failing.
var options = json.JoinOptions(
	json.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
)

// Unmarshal decodes data into v. A value of the wrong kind for its field is
// a *TypeError; other failures (invalid JSON) are returned as they are.
func Unmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v, options)
	var se *json.SemanticError
	if errors.As(err, &se) && se.GoType != nil && se.JSONKind != 0 {
		return &TypeError{Path: dotted(se.JSONPointer), Want: se.GoType, Got: kindName(se.JSONKind)}
	}
	return err
}

// TypeError is a JSON value of the wrong kind for the Go field it decodes
// into.
type TypeError struct {
	Path string       // the member, dotted ("lease.providerLeaseId"); "" for the whole value
	Want reflect.Type // the Go type it should have decoded into
	Got  string       // what it is: "a string", "a number", "an object", ...
}

func (e *TypeError) Error() string {
	return "json: cannot decode " + e.Got + " at " + e.Path + " into " + e.Want.String()
}

// dotted turns a JSON Pointer ("/lease/providerLeaseId") into the dotted
// member path error messages name.
func dotted(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return strings.Join(parts, ".")
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a JSON value"
}
