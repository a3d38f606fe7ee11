package responsecost

import (
	"bytes"
	"encoding/json"
)

// fieldState is what one JSON document says at a path.
type fieldState uint8

const (
	// fieldAbsent: the document is no JSON object, or the path leads nowhere or to null.
	fieldAbsent fieldState = iota
	// fieldInvalid: the path holds a value that is no cost (a string, 1.5, -1, 1e300 ...).
	fieldInvalid
	// fieldCost: the path holds a cost.
	fieldCost
)

// jsonField is a compiled Field path.
type jsonField struct {
	path []string
	// needle is the last segment and its closing quote, as they appear in any document
	// holding the path unescaped: a document without it is not decoded. (The opening quote
	// is left out: it is the most common byte in JSON, and bytes.Index is faster on a
	// needle whose first byte is rarer.)
	needle []byte
}

// newJSONField compiles field, or reports ok=false for an invalid or empty one.
func newJSONField(field string) (jsonField, bool) {
	if field == "" {
		return jsonField{}, false
	}
	path, err := parsePath(field)
	if err != nil {
		return jsonField{}, false
	}
	return jsonField{path: path, needle: []byte(path[len(path)-1] + `"`)}, true
}

// read is what doc says at f's path, and the cost when it states one.
func (f jsonField) read(doc []byte) (int64, fieldState) {
	if !bytes.Contains(doc, f.needle) {
		return 0, fieldAbsent
	}
	raw := json.RawMessage(doc)
	for _, seg := range f.path {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return 0, fieldAbsent // not an object: the path leads nowhere
		}
		v, ok := obj[seg]
		if !ok {
			return 0, fieldAbsent
		}
		raw = v
	}
	return readCost(bytes.TrimSpace(raw))
}

// readCost is what raw, one JSON value, states as a cost.
func readCost(raw []byte) (int64, fieldState) {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return 0, fieldAbsent
	case raw[0] != '-' && (raw[0] < '0' || raw[0] > '9'):
		return 0, fieldInvalid
	}
	if n, ok := parseJSONCost(raw); ok {
		return n, fieldCost
	}
	return 0, fieldInvalid
}
