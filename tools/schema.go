package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/invopop/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
)

// reflectSchema inlines everything (no $ref/$defs) and drops $schema/$id: models and
// several clients read inline schemas best, and 2020-12 is MCP's default dialect anyway.
// edit adjusts properties that depend on the configuration (enums, maximums).
func reflectSchema(v any, edit func(props func(string) *jsonschema.Schema)) json.RawMessage {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	s := r.Reflect(v)
	s.Version, s.ID = "", ""
	if edit != nil {
		edit(func(name string) *jsonschema.Schema {
			p, ok := s.Properties.Get(name)
			if !ok {
				// A property renamed in the struct but not here is a programming error
				// the golden snapshot test catches; return a throwaway to keep going.
				return &jsonschema.Schema{}
			}
			return p
		})
	}
	b, err := json.Marshal(s)
	if err != nil {
		// The reflected types are fixed structs; marshalling them cannot fail at run time.
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

// bindStrict decodes tool arguments, refusing unknown fields and naming wrong types the
// way a model can act on (the encoding/json messages mention Go struct names).
func bindStrict(req mcp.CallToolRequest, dst any, known []string) error {
	raw, err := json.Marshal(req.GetRawArguments())
	if err != nil {
		return fmt.Errorf("arguments are not a JSON object")
	}
	if string(raw) == "null" {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	err = dec.Decode(dst)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return fmt.Errorf("arguments must be a JSON object, got %s", typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Errorf("argument %q must be %s, got %s", typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		sorted := slices.Clone(known)
		slices.Sort(sorted)
		return fmt.Errorf("unknown argument %s; accepted arguments: %s", field, strings.Join(sorted, ", "))
	}
	return fmt.Errorf("invalid arguments: %w", err)
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "an array of objects"
		}
		return "an array of strings"
	case reflect.Float64, reflect.Int, reflect.Int64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct:
		return "an object"
	}
	return "of another type"
}

func boolPtr(b bool) *bool { return &b }
