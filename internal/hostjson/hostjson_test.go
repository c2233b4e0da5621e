package hostjson

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type inner struct {
	ProviderLeaseID string `json:"providerLeaseId"`
}

type params struct {
	CompanyID string  `json:"companyId"`
	Timeout   float64 `json:"timeoutMs"`
	Lease     inner   `json:"lease"`
	embedded
}

type embedded struct {
	DriverKey string `json:"driverKey"`
}

func TestUnmarshalReadsAsTheHostDoes(t *testing.T) {
	tests := []struct {
		name, in string
		want     params
	}{
		{"exact keys", `{"companyId":"c","driverKey":"d","lease":{"providerLeaseId":"l"}}`,
			params{CompanyID: "c", Lease: inner{"l"}, embedded: embedded{"d"}}},
		// JSON.parse reads companyId as x; "CompanyId" is
		// another key, which no field has.
		{"a key in another case is ignored", `{"companyId":"x","CompanyId":"c","DRIVERKEY":"d","lease":{"ProviderLeaseId":"l"}}`,
			params{CompanyID: "x"}},
		{"another case alone is ignored", `{"CompanyId":"c"}`, params{}},
		{"the last duplicate wins", `{"companyId":"a","companyId":"b"}`, params{CompanyID: "b"}},
		{"an escaped key is the key", `{"\u0063ompanyId":"c"}`, params{CompanyID: "c"}},
		{"a lone surrogate decodes as U+FFFD", `{"companyId":"a\ud800b"}`, params{CompanyID: "a\ufffdb"}},
	}
	for _, tc := range tests {
		var got params
		if err := Unmarshal([]byte(tc.in), &got); err != nil || got != tc.want {
			t.Errorf("%s: %s = %+v, %v; want %+v", tc.name, tc.in, got, err, tc.want)
		}
	}
}

func TestUnmarshalNamesTheMemberOfTheWrongKind(t *testing.T) {
	tests := []struct{ in, path, got string }{
		{`{"timeoutMs":"5"}`, "timeoutMs", "a string"},
		{`{"lease":{"providerLeaseId":7}}`, "lease.providerLeaseId", "a number"},
		{`{"driverKey":[]}`, "driverKey", "an array"},
		{`[1]`, "", "an array"},
	}
	for _, tc := range tests {
		var p params
		var te *TypeError
		if err := Unmarshal([]byte(tc.in), &p); !errors.As(err, &te) || te.Path != tc.path || te.Got != tc.got {
			t.Errorf("%s: err = %v (%+v); want %s at %q", tc.in, err, te, tc.got, tc.path)
		}
	}
	if err := Unmarshal([]byte(`{"companyId":`), new(params)); err == nil {
		t.Error("truncated JSON decoded")
	}
}
