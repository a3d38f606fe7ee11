package limiter

import (
	"fmt"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// checkLayout enforces what the scripts need of the key templates: distinct keys for each
// limit and window slot, one shared non-empty hash tag for every key of a call (one Cluster
// slot), and untrusted values that cannot run into the text after them.
func checkLayout(c PolicyConfig, state, idem *keylayout.Template) FieldErrors {
	var errs FieldErrors
	if len(c.Limits) > 1 && !state.Uses(keylayout.VarLimit) {
		errs.add("keyLayout.state", "%q must use ${%s}: with %d limits each needs its own key",
			state, keylayout.VarLimit, len(c.Limits))
	}
	if c.Algorithm == SlidingWindow && !state.Uses(keylayout.VarSlot) {
		errs.add("keyLayout.state", "%q must use ${%s}: SlidingWindow keeps two window slots per limit",
			state, keylayout.VarSlot)
	}
	if err := checkDelimited(state); err != nil {
		errs.add("keyLayout.state", "%v", err)
	}
	errs = append(errs, checkEmptyTag("keyLayout.state", state)...)
	multiKey := len(c.Limits) > 1 || c.Algorithm == SlidingWindow || idem != nil
	tag, ok := state.HashTag()
	if multiKey && !ok {
		errs.add("keyLayout.state", "%q has no hash tag: a call touches several keys, which must share one non-empty {tag} to stay on one Cluster slot", state)
	}
	if idem == nil {
		return errs
	}
	errs = append(errs, checkEmptyTag("keyLayout.idempotency", idem)...)
	if !idem.Uses(keylayout.VarRequestID) {
		errs.add("keyLayout.idempotency", "%q must use ${%s}", idem, keylayout.VarRequestID)
	}
	if err := checkDelimited(idem); err != nil {
		errs.add("keyLayout.idempotency", "%v", err)
	}
	if itag, _ := idem.HashTag(); ok && itag != tag {
		sample := sampleValues(c)
		errs.add("keyLayout.idempotency", "%q has hash tag {%s} but the state key %q has {%s}: for identity %q they hash to slots %d and %d; every key of a call must share one tag (one Cluster slot)",
			idem, itag, state, tag, sample.Identity, keylayout.Slot(idem.Expand(sample)), keylayout.Slot(state.Expand(sample)))
	}
	return errs
}

func checkEmptyTag(field string, t *keylayout.Template) FieldErrors {
	var errs FieldErrors
	if t.EmptyTag() {
		errs.add(field, "%q starts with the empty hash tag {}, which Redis ignores (it hashes the whole key): put the identity inside, e.g. {rl:${identity}}", t)
	}
	return errs
}

// checkDelimited requires each untrusted variable to end the template or be followed by ":"
// or "}", characters that encoded values never contain, so distinct values give distinct keys.
func checkDelimited(t *keylayout.Template) error {
	src := t.String()
	for _, name := range []string{keylayout.VarIdentity, keylayout.VarRequestID} {
		ref := "${" + name + "}"
		for off := 0; ; {
			i := strings.Index(src[off:], ref)
			if i < 0 {
				break
			}
			end := off + i + len(ref)
			if end < len(src) && src[end] != ':' && src[end] != '}' {
				return fmt.Errorf("%q: ${%s} must be followed by ':' or '}' or end the key, not %q",
					src, name, src[end])
			}
			off = end
		}
	}
	return nil
}

// sampleValues are the variable values used to show the slots keys would land on.
func sampleValues(c PolicyConfig) *keylayout.Values {
	v := &keylayout.Values{Namespace: c.Namespace, Policy: c.Name, Identity: "alice", Slot: "0", RequestID: "req-1"}
	if len(c.Limits) > 0 {
		v.Limit = c.Limits[0].Name
	}
	return v
}
