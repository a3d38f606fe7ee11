package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// durationType is the API's duration: a JSON string Go's time.ParseDuration reads.
var durationType = reflect.TypeFor[metav1.Duration]()

// CheckDurations reports every duration field of raw (a JSON object of the API type of
// template, e.g. a *v1alpha1.RateLimitPolicy) that is present but that Go cannot decode,
// each as Invalid on its own field. The fields are found by walking the Go type, not listed
// by hand, so a duration added to the API later is checked too. A body that is not a JSON
// object is left to the decoder.
//
// The admission webhook runs it before decoding (the mutating webhook runs before the
// schema, and a decoding error names no field); `kubectl ratelimit lint` runs it offline.
func CheckDurations(raw []byte, template any) field.ErrorList {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var errs field.ErrorList
	walkDurations(v, reflect.TypeOf(template), nil, &errs)
	return errs
}

// walkDurations checks v, a decoded JSON value at path, against t.
func walkDurations(v any, t reflect.Type, path *field.Path, errs *field.ErrorList) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return
	}
	switch {
	case t == durationType:
		if err := parseDuration(v); err != nil {
			*errs = append(*errs, field.Invalid(path, v, err.Error()))
		}
	case t.Kind() == reflect.Struct:
		if obj, ok := v.(map[string]any); ok {
			walkFields(obj, t, path, errs)
		}
	case t.Kind() == reflect.Slice:
		if list, ok := v.([]any); ok {
			for i, item := range list {
				walkDurations(item, t.Elem(), path.Index(i), errs)
			}
		}
	case t.Kind() == reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for k, item := range obj {
				walkDurations(item, t.Elem(), path.Key(k), errs)
			}
		}
	}
}

// walkFields checks each JSON field of struct type t present in obj; inlined fields (an
// embedded struct, or `json:",inline"`) are read from obj itself.
func walkFields(obj map[string]any, t reflect.Type, path *field.Path, errs *field.ErrorList) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && (f.Anonymous || strings.Contains(f.Tag.Get("json"), "inline")):
			walkFields(obj, derefType(f.Type), path, errs)
		default:
			if name == "" {
				name = f.Name
			}
			child := field.NewPath(name)
			if path != nil {
				child = path.Child(name)
			}
			walkDurations(obj[name], f.Type, child, errs)
		}
	}
}

// derefType is t without its pointers.
func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// parseDuration checks one decoded duration value (null is left to the schema).
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
