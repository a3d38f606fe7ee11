package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	// durationType is the API's duration: a JSON string Go's time.ParseDuration reads.
	durationType = reflect.TypeFor[metav1.Duration]()
	// unmarshalerType marks a type that decodes itself (a leaf of the walk).
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// CheckDecodable reports every field of raw (a JSON object of the API type of template, e.g.
// a *v1alpha1.RateLimitPolicy) that is present but that Go cannot decode into its field,
// each as Invalid on its own field: a duration Go cannot parse ("1y"), a string where a
// number goes, a number too large for its field. The fields are found by walking the Go
// type, not listed by hand, so a field added to the API later is checked too. A body that is
// not a JSON object is left to the decoder.
//
// The admission webhook runs it before decoding (the mutating webhook runs before the
// schema, and a decoding error names no field); `kubectl ratelimit lint` runs it offline.
func CheckDecodable(raw []byte, template any) field.ErrorList {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	var errs field.ErrorList
	walk(v, reflect.TypeOf(template), nil, &errs)
	return errs
}

// walk checks v, a decoded JSON value at path, against t.
func walk(v any, t reflect.Type, path *field.Path, errs *field.ErrorList) {
	t = derefType(t)
	if v == nil {
		return
	}
	if err := checkShape(v, t); err != nil {
		*errs = append(*errs, field.Invalid(path, v, err.Error()))
		return
	}
	switch {
	case isLeaf(t):
	case t.Kind() == reflect.Struct:
		walkFields(v.(map[string]any), t, path, errs)
	case t.Kind() == reflect.Slice:
		for i, item := range v.([]any) {
			walk(item, t.Elem(), path.Index(i), errs)
		}
	case t.Kind() == reflect.Map:
		for k, item := range v.(map[string]any) {
			walk(item, t.Elem(), path.Key(k), errs)
		}
	}
}

// isLeaf reports whether t is decoded whole: a type that decodes itself, or one that holds
// no fields.
func isLeaf(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return false
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8
	}
	return true
}

// checkShape is why v cannot be decoded as a t at its level (its fields are walked apart).
func checkShape(v any, t reflect.Type) error {
	switch {
	case t == durationType:
		return parseDuration(v)
	case isLeaf(t):
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, reflect.New(t).Interface())
		}
		if ute := (*json.UnmarshalTypeError)(nil); errors.As(err, &ute) {
			return fmt.Errorf("must be %s", kindName(t))
		}
		return err
	case t.Kind() == reflect.Slice:
		if _, ok := v.([]any); !ok {
			return errors.New("must be an array")
		}
	default:
		if _, ok := v.(map[string]any); !ok {
			return errors.New("must be an object")
		}
	}
	return nil
}

// kindName says what JSON value a leaf of type t takes.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer that fits %s", t.Kind())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

// walkFields checks each JSON field of struct type t present in obj; inlined fields (an
// embedded struct, or `json:",inline"`) are read from obj itself.
func walkFields(obj map[string]any, t reflect.Type, path *field.Path, errs *field.ErrorList) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && (f.Anonymous || strings.Contains(tag, "inline")):
			walkFields(obj, derefType(f.Type), path, errs)
		default:
			if name == "" {
				name = f.Name
			}
			walk(obj[name], f.Type, childPath(path, name), errs)
		}
	}
}

// childPath is path's child name, or the root field name when path is nil.
func childPath(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

// derefType is t without its pointers.
func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// parseDuration checks one decoded duration value.
func parseDuration(v any) error {
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		return fmt.Errorf("must be a duration string such as \"1s\", \"1m30s\" or \"500ms\", not %s", b)
	}
	if _, err := time.ParseDuration(s); err != nil {
		return fmt.Errorf("is not a duration (%w): write it with the units h, m, s and ms, such as \"1h\", \"1m30s\" or \"500ms\"", err)
	}
	return nil
}
