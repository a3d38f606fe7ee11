package condition

import (
	"reflect"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// headerMap is a request's headers as a CEL map of lower-case names to values (an absent
// header is absent: headers["x"] fails, so the condition does not hold). Looking up
// one header (the common condition) scans the header without building a map; anything
// else (iteration, size, equality) works on a lower-cased copy built on first use.
type headerMap struct {
	a    *activation
	full traits.Mapper
}

// lookup is the value of header name (any case) and whether it is present; a header on
// several field lines is recorded on the activation, which refuses the request.
func (m *headerMap) lookup(name string) (string, bool) {
	for k, vs := range m.a.req.Header {
		if !strings.EqualFold(k, name) {
			continue
		}
		if len(vs) > 1 {
			m.a.repeated = k
			return "", false
		}
		if len(vs) == 1 {
			return vs[0], true
		}
	}
	return "", false
}

func (m *headerMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.ValOrErr(key, "no such overload"), false
	}
	v, present := m.lookup(string(k))
	if !present {
		return nil, false
	}
	return types.String(v), true
}

func (m *headerMap) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found && v == nil {
		return types.NewErr("no such key: %v", key)
	}
	return v
}

func (m *headerMap) Contains(key ref.Val) ref.Val {
	k, ok := key.(types.String)
	if !ok {
		return types.ValOrErr(key, "no such overload")
	}
	_, present := m.lookup(string(k))
	return types.Bool(present)
}

// copy is the lower-cased copy of the headers, built once.
func (m *headerMap) copy() traits.Mapper {
	if m.full == nil {
		c := make(map[string]string, len(m.a.req.Header))
		for k, vs := range m.a.req.Header {
			if len(vs) > 1 {
				m.a.repeated = k
			}
			if len(vs) > 0 {
				c[strings.ToLower(k)] = vs[0]
			}
		}
		m.full = types.NewStringStringMap(types.DefaultTypeAdapter, c)
	}
	return m.full
}

func (m *headerMap) Iterator() traits.Iterator { return m.copy().Iterator() }

func (m *headerMap) Size() ref.Val { return m.copy().Size() }

func (m *headerMap) ConvertToNative(t reflect.Type) (any, error) { return m.copy().ConvertToNative(t) }

func (m *headerMap) ConvertToType(t ref.Type) ref.Val { return m.copy().ConvertToType(t) }

func (m *headerMap) Equal(other ref.Val) ref.Val { return m.copy().Equal(other) }

func (m *headerMap) Type() ref.Type { return types.MapType }

func (m *headerMap) Value() any { return m.copy().Value() }
