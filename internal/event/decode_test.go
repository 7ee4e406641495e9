package event

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"testing"
)

// TestEveryTypeHasABody: each Type constant declared in event.go has a body struct.
func TestEveryTypeHasABody(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || vs.Type == nil || vs.Type.(*ast.Ident).Name != "Type" {
			return true
		}
		for _, v := range vs.Values {
			s, _ := strconv.Unquote(v.(*ast.BasicLit).Value)
			n++
			if _, ok := bodies[Type(s)]; !ok {
				t.Errorf("event type %q has no body struct", s)
			}
		}
		return true
	})
	if n != len(bodies) {
		t.Errorf("%d types declared, %d with a body", n, len(bodies))
	}
}

func TestDecodeBody(t *testing.T) {
	in := NetBody{Host: "example.com", Port: 443, Proto: "connect", Reason: "no rule", DurationMS: 3}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []Type{NetAllow, NetDeny} {
		got, err := DecodeBody(typ, raw)
		if err != nil || !reflect.DeepEqual(got, in) {
			t.Errorf("DecodeBody(%s) = %#v, %v; want %#v", typ, got, err, in)
		}
	}
	// A newer writer's field is ignored; the known ones are read.
	got, err := DecodeBody(CmdEnd, []byte(`{"exit_code":2,"later_field":{"x":1}}`))
	if err != nil || got.(CmdEndBody).ExitCode != 2 {
		t.Errorf("DecodeBody with an unknown field = %#v, %v", got, err)
	}
	for typ, zero := range bodies {
		got, err := DecodeBody(typ, []byte(`{}`))
		if err != nil || reflect.TypeOf(got) != reflect.TypeOf(zero) {
			t.Errorf("DecodeBody(%s, {}) = %T, %v; want a %T", typ, got, err, zero)
		}
	}
	if _, err := DecodeBody("net.maybe", []byte(`{}`)); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: got %v, want ErrUnknownType", err)
	}
	if _, err := DecodeBody(NetDeny, []byte(`{"port":"443"}`)); err == nil {
		t.Error("a body of the wrong shape decoded")
	}
}
