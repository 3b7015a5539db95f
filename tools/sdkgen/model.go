package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Model is what the templates see: openapi.yaml boiled down to what a
// transport needs, every list in a fixed order.
type Model struct {
	Title      string
	Version    string
	Types      []NamedType // components/schemas, by name
	Operations []Operation // by path, then method
	ErrorCodes []string    // the Error schema's code enum, as declared
	Headers    []Header    // request headers, 2xx answer headers and Authorization, by name
}

// NamedType is a schema of components/schemas.
type NamedType struct {
	Name        string
	Description string
	Type        *Type
}

// Type is a schema. Kind is one of any, string, integer, number, boolean,
// array, object, union, ref; a Ref names a NamedType; Enum lists the literal
// values a type allows (null among them if it is nullable).
type Type struct {
	Kind        string
	Ref         string
	Target      *Type  // ref: the named schema it names (set by Load)
	Items       *Type  // array
	Props       []Prop // object, by name
	Values      *Type  // object: additionalProperties
	Variants    []*Type
	Enum        []any
	Nullable    bool // null is allowed and not already in Enum
	Description string
}

// AllowsNull reports whether null is a value of the type: nullable, or
// null among its Enum values.
func (t *Type) AllowsNull() bool {
	if t.Nullable {
		return true
	}
	for _, v := range t.Enum {
		if v == nil {
			return true
		}
	}
	return false
}

// Raw reports whether the type is JSON as it is: any, a union, or a ref to
// one (the Go transport's json.RawMessage; C#'s JsonElement).
func (t *Type) Raw() bool {
	if t.Kind == "ref" {
		return t.Target.Raw()
	}
	return t.Kind == "any" || t.Kind == "union"
}

// Record reports whether the type is a ref to an object schema with
// properties: a record, struct or class of its own in every language.
func (t *Type) Record() bool {
	return t.Kind == "ref" && t.Target.Kind == "object" && len(t.Target.Props) > 0
}

// Prop is one property of an object.
type Prop struct {
	Name        string
	Type        *Type
	Required    bool
	Description string
}

// Operation is one route.
type Operation struct {
	ID          string
	Method      string
	Path        string
	Summary     string
	Description string
	Auth        bool    // whether it takes the bearer token
	Body        *Type   // the JSON request body, or nil
	Answer      *Type   // the 2xx answer
	AnswerText  bool    // the 2xx answer is text, not JSON
	Headers     []Param // header parameters, as declared
}

// Param is a header parameter.
type Param struct {
	Name        string
	Type        *Type
	Required    bool
	Description string
}

// Header is a header name the API uses.
type Header struct {
	Name        string
	Description string
}

// Load reads and validates the spec and builds the model.
func Load(path string) (*Model, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &Model{Title: doc.Info.Title, Version: doc.Info.Version}

	for _, name := range sortedKeys(doc.Components.Schemas) {
		ref := doc.Components.Schemas[name]
		m.Types = append(m.Types, NamedType{Name: name, Description: ref.Value.Description, Type: inline(ref.Value)})
	}
	if e, ok := doc.Components.Schemas["Error"]; ok {
		if code, ok := e.Value.Properties["code"]; ok {
			for _, v := range code.Value.Enum {
				m.ErrorCodes = append(m.ErrorCodes, fmt.Sprint(v))
			}
		}
	}
	if len(m.ErrorCodes) == 0 {
		return nil, fmt.Errorf("%s: components/schemas/Error has no code enum", path)
	}

	headers := map[string]string{}
	for _, p := range doc.Components.Parameters {
		if p.Value.In == openapi3.ParameterInHeader {
			headers[p.Value.Name] = p.Value.Description
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, o := range item.Operations() {
			for code, r := range o.Responses.Map() {
				if !strings.HasPrefix(code, "2") {
					continue
				}
				for name, h := range r.Value.Headers {
					headers[name] = h.Value.Description
				}
			}
		}
	}
	for _, s := range doc.Components.SecuritySchemes {
		if s.Value.Type == "http" {
			headers["Authorization"] = s.Value.Description
		}
	}
	for _, name := range sortedKeys(headers) {
		m.Headers = append(m.Headers, Header{Name: name, Description: headers[name]})
	}

	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for _, method := range sortedKeys(item.Operations()) {
			// x-sdk: false marks an operator's route the clients have no
			// call for (GET /_backup answers a file: fenec backup's).
			if v, ok := item.GetOperation(method).Extensions["x-sdk"]; ok && v == false {
				continue
			}
			op, err := operation(doc, path, method, item.GetOperation(method))
			if err != nil {
				return nil, err
			}
			m.Operations = append(m.Operations, op)
		}
	}
	sort.SliceStable(m.Operations, func(i, j int) bool { return m.Operations[i].Path < m.Operations[j].Path })
	if err := m.resolve(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// resolve sets every ref's Target, so that a template can tell a ref to an
// object from a ref to an alias (C# has no type aliases: a ref to Value is
// JsonElement there).
func (m *Model) resolve() error {
	named := map[string]*Type{}
	for _, n := range m.Types {
		named[n.Name] = n.Type
	}
	var walk func(t *Type) error
	walk = func(t *Type) error {
		if t == nil {
			return nil
		}
		if t.Kind == "ref" {
			if t.Target = named[t.Ref]; t.Target == nil {
				return fmt.Errorf("no schema %q", t.Ref)
			}
		}
		for _, c := range append([]*Type{t.Items, t.Values}, t.Variants...) {
			if err := walk(c); err != nil {
				return err
			}
		}
		for _, p := range t.Props {
			if err := walk(p.Type); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range m.Types {
		if err := walk(n.Type); err != nil {
			return err
		}
	}
	for _, op := range m.Operations {
		for _, t := range []*Type{op.Body, op.Answer} {
			if err := walk(t); err != nil {
				return err
			}
		}
		for _, h := range op.Headers {
			if err := walk(h.Type); err != nil {
				return err
			}
		}
	}
	return nil
}

func operation(doc *openapi3.T, path, method string, o *openapi3.Operation) (Operation, error) {
	if o.OperationID == "" {
		return Operation{}, fmt.Errorf("%s %s has no operationId", method, path)
	}
	op := Operation{
		ID:          o.OperationID,
		Method:      method,
		Path:        path,
		Summary:     o.Summary,
		Description: strings.TrimSpace(o.Description),
		Auth:        len(doc.Security) > 0,
	}
	if o.Security != nil {
		op.Auth = len(*o.Security) > 0
	}
	for _, p := range o.Parameters {
		if p.Value.In != openapi3.ParameterInHeader {
			return Operation{}, fmt.Errorf("%s: only header parameters are supported, not %s %s", o.OperationID, p.Value.In, p.Value.Name)
		}
		op.Headers = append(op.Headers, Param{Name: p.Value.Name, Type: typeOf(p.Value.Schema), Required: p.Value.Required, Description: strings.TrimSpace(p.Value.Description)})
	}
	if o.RequestBody != nil {
		mt := o.RequestBody.Value.Content.Get("application/json")
		if mt == nil {
			return Operation{}, fmt.Errorf("%s: the request body must be application/json", o.OperationID)
		}
		op.Body = typeOf(mt.Schema)
	}
	for _, code := range []int{http.StatusOK, http.StatusCreated, http.StatusNoContent} {
		r := o.Responses.Status(code)
		if r == nil {
			continue
		}
		if mt := r.Value.Content.Get("application/json"); mt != nil {
			op.Answer = typeOf(mt.Schema)
		} else if mt := r.Value.Content.Get("text/plain"); mt != nil {
			op.Answer, op.AnswerText = &Type{Kind: "string"}, true
		}
		break
	}
	if op.Answer == nil {
		return Operation{}, fmt.Errorf("%s: no 2xx answer with application/json or text/plain content", o.OperationID)
	}
	return op, nil
}

// typeOf is a reference to a named schema, or the schema itself.
func typeOf(ref *openapi3.SchemaRef) *Type {
	if ref == nil {
		return &Type{Kind: "any"}
	}
	if ref.Ref != "" {
		return &Type{Kind: "ref", Ref: ref.Ref[strings.LastIndex(ref.Ref, "/")+1:]}
	}
	return inline(ref.Value)
}

func inline(s *openapi3.Schema) *Type {
	t := &Type{Description: strings.TrimSpace(s.Description), Enum: s.Enum, Nullable: s.Nullable}
	for _, v := range s.Enum {
		if v == nil {
			t.Nullable = false
		}
	}
	switch {
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		t.Kind = "union"
		for _, v := range append(s.OneOf, s.AnyOf...) {
			t.Variants = append(t.Variants, typeOf(v))
		}
	case s.Type.Is("array"):
		t.Kind, t.Items = "array", typeOf(s.Items)
	case s.Type.Is("object") || len(s.Properties) > 0:
		t.Kind = "object"
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		for _, name := range sortedKeys(s.Properties) {
			p := s.Properties[name]
			t.Props = append(t.Props, Prop{Name: name, Type: typeOf(p), Required: required[name], Description: strings.TrimSpace(p.Value.Description)})
		}
		if ap := s.AdditionalProperties.Schema; ap != nil {
			t.Values = typeOf(ap)
		}
	case s.Type.Is("string"), s.Type.Is("integer"), s.Type.Is("number"), s.Type.Is("boolean"):
		t.Kind = s.Type.Slice()[0]
	default:
		t.Kind, t.Nullable = "any", false
	}
	return t
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
