package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/hostjson"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/syncrule"
	"github.com/paperclip-sandbox/sandbox-plugin/rpc"
)

// checker is implemented by params with required fields.
type checker interface{ check() error }

// decodeParams reads raw into v as the host reads it (hostjson: exact,
// case-sensitive keys) and reports shape errors as -32602 naming the field.
func decodeParams(raw json.RawMessage, v any) error {
	if err := hostjson.Unmarshal(raw, v); err != nil {
		var te *hostjson.TypeError
		if errors.As(err, &te) {
			field := te.Path
			if field == "" {
				field = "params"
			}
			return rpc.InvalidParams("%q must be %s, not %s.", field, kindOf(te.Want), te.Got)
		}
		return rpc.InvalidParams("params could not be read as JSON; send one JSON object.")
	}
	if c, ok := v.(checker); ok {
		return c.check()
	}
	return nil
}

// kindOf names a Go type the way a JSON author thinks of it.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint32, reflect.Uint64, reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

func missing(fields ...string) error {
	return rpc.InvalidParams("%s required.", joinFields(fields))
}

func joinFields(fields []string) string {
	q := make([]string, len(fields))
	for i, f := range fields {
		q[i] = fmt.Sprintf("%q", f)
	}
	if len(q) == 1 {
		return q[0] + " is"
	}
	return strings.Join(q, ", ") + " are"
}

// need reports the names whose values are empty.
func need(pairs ...string) error {
	var absent []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			absent = append(absent, pairs[i])
		}
	}
	if len(absent) > 0 {
		return missing(absent...)
	}
	return nil
}

func (p *BaseParams) check() error {
	if p.Config == nil {
		p.Config = Object{}
	}
	return need("driverKey", p.DriverKey, "companyId", p.CompanyID, "environmentId", p.EnvironmentID)
}

// checkWith checks the base fields, then that the call's own required
// field (name, with value v) is there.
func (p *BaseParams) checkWith(name, v string) error {
	if err := p.check(); err != nil {
		return err
	}
	return need(name, v)
}

// orphanDestroyParams decodes environmentDestroyLease, which the host also
// sends for orphan cleanup after the environment was deleted: then its
// environmentId is "" ("the provider teardown keys on the provider lease
// id", server services/environment-runtime.js), so it is not required.
type orphanDestroyParams struct{ ReleaseLeaseParams }

func (p *orphanDestroyParams) check() error {
	if p.Config == nil {
		p.Config = Object{}
	}
	return need("driverKey", p.DriverKey, "companyId", p.CompanyID)
}

func (p *ValidateConfigParams) check() error {
	if p.Config == nil {
		p.Config = Object{}
	}
	return need("driverKey", p.DriverKey)
}

func (p *AcquireLeaseParams) check() error { return p.BaseParams.checkWith("runId", p.RunID) }

func (p *ResumeLeaseParams) check() error {
	return p.BaseParams.checkWith("providerLeaseId", p.ProviderLeaseID)
}

func (p *ExecuteParams) check() error { return p.BaseParams.checkWith("command", p.Command) }

func (p *StartSetupParams) check() error { return p.BaseParams.checkWith("sessionId", p.SessionID) }

func (p *DeleteTemplateParams) check() error {
	return p.BaseParams.checkWith("templateRef", p.TemplateRef)
}

func (p *SyncParams) check() error {
	if err := p.BaseParams.check(); err != nil {
		return err
	}
	for i, op := range p.Operations {
		for j, f := range op.Files {
			where := fmt.Sprintf("operations[%d].files[%d]", i, j)
			switch syncrule.RuleOf(syncrule.CheckShape(syncrule.Mapping{Source: f.SourcePath, Target: f.TargetPath, Kind: f.Kind})) {
			case syncrule.RuleRequired:
				return missing(where+".sourcePath", where+".targetPath")
			case syncrule.RuleKind:
				return rpc.InvalidParams("%q must be \"file\" or \"directory\".", where+".kind")
			}
		}
	}
	return nil
}
