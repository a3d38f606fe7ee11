package httpcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// readJSON decodes body into v: at most maxCheckBody bytes of one JSON object of known
// fields only. what names the request in errors ("a settle request").
func readJSON(body io.Reader, v any, what string) error {
	data, err := io.ReadAll(io.LimitReader(body, maxCheckBody+1))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if len(data) > maxCheckBody {
		return fmt.Errorf("body is larger than %d bytes", maxCheckBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body is not %s: %w", what, err)
	}
	if dec.More() {
		return errors.New("body has data after the JSON object")
	}
	return nil
}
