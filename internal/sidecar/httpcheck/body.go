package httpcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
)

// readBody reads a request body of at most maxCheckBody bytes, or says why not with the
// status to answer (413 beyond the bound).
func readBody(body io.Reader) ([]byte, int, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxCheckBody+1))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if len(data) > maxCheckBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body is larger than %d bytes", maxCheckBody)
	}
	return data, 0, nil
}

// decodeStrict decodes data into v: one JSON object of known fields only. what names the
// request in errors ("a settle request").
func decodeStrict(data []byte, v any, what string) error {
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

// readJSON reads body (readBody) and decodes it into v (decodeStrict).
func readJSON(body io.Reader, v any, what string) error {
	data, _, err := readBody(body)
	if err != nil {
		return err
	}
	return decodeStrict(data, v, what)
}

// Caller names the caller of a check, as the check API's calls that follow one (settle,
// release) name it again: the policy, the identity or its parts, and the tier or the
// request that chose it.
type Caller struct {
	// Policy names the policy, as the check did.
	Policy string `json:"policy"`
	// Identity is the caller's identity, as the check stated it.
	Identity string `json:"identity,omitempty"`
	// Parts are a composite identity's parts, as the check stated them.
	Parts []string `json:"parts,omitempty"`
	// Tier is the tier the check named, if it named one.
	Tier string `json:"tier,omitempty"`
	// Request is the request the check described, if it described one.
	Request *checkwire.Attributes `json:"request,omitempty"`
}

// check is the check request of c at cost (0: the policy's default).
func (c *Caller) check(cost int64) *checkwire.Request {
	return &checkwire.Request{Policy: c.Policy, Identity: c.Identity, Parts: c.Parts, Cost: cost, Tier: c.Tier, Request: c.Request}
}

// validate says what is wrong with c, naming the field.
func (c *Caller) validate() error {
	switch {
	case c.Policy == "":
		return errors.New("policy: required")
	case c.Tier != "" && c.Request != nil:
		return errors.New("tier: set tier or request, not both")
	}
	return nil
}
