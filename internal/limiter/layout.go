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
	if err := checkDelimited(state); err != nil {
		errs.add("keyLayout.state", "%v", err)
	}
	errs = append(errs, checkEmptyTag("keyLayout.state", state)...)
	multiKey := len(c.Limits) > 1 || idem != nil
	tag, ok := state.HashTag()
	errs = append(errs, checkTagVars("keyLayout.state", state, tag, ok)...)
	if multiKey && !ok {
		errs.add("keyLayout.state", "%q has no hash tag: a call touches several keys, which must share one non-empty {tag} to stay on one Cluster slot", state)
	}
	if idem != nil {
		errs = append(errs, checkIdempotencyLayout(c, state, idem)...)
	}
	return errs
}

// checkIdempotencyLayout checks the request-id key: well formed, and on the state key's tag.
func checkIdempotencyLayout(c PolicyConfig, state, idem *keylayout.Template) FieldErrors {
	var errs FieldErrors
	errs = append(errs, checkEmptyTag("keyLayout.idempotency", idem)...)
	if itag, iok := idem.HashTag(); iok {
		errs = append(errs, checkTagVars("keyLayout.idempotency", idem, itag, iok)...)
	}
	if !idem.Uses(keylayout.VarRequestID) {
		errs.add("keyLayout.idempotency", "%q must use ${%s}", idem, keylayout.VarRequestID)
	}
	if err := checkDelimited(idem); err != nil {
		errs.add("keyLayout.idempotency", "%v", err)
	}
	tag, ok := state.HashTag()
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
		return errs
	}
	if tag, ok := t.HashTag(); ok && !t.TagNeverEmpty(neverEmptyVars...) {
		errs.add(field, "%q has a hash tag {%s} that expands to the empty tag {} when ${%s} is empty (a request without identity, counted as Shared): Redis then hashes whole keys and a call's keys land on different Cluster slots; put literal text or ${%s} in the tag, e.g. {rl:${%s}/${%s}:${identity}}",
			t, tag, keylayout.VarIdentity, keylayout.VarNamespace, keylayout.VarNamespace, keylayout.VarPolicy)
	}
	return errs
}

// neverEmptyVars are the variables whose values are never empty: Kubernetes names and limit
// names. The identity is empty for the Shared caller, and ${slot} always expands empty.
var neverEmptyVars = []string{keylayout.VarNamespace, keylayout.VarPolicy, keylayout.VarLimit}

// checkTagVars requires the hash tag to be the same for every key of one call: it may use
// ${namespace}, ${policy} and ${identity}, never ${limit}, ${slot} or ${requestId}, which
// vary between the keys of a call and would spread them over several Cluster slots.
func checkTagVars(field string, t *keylayout.Template, tag string, ok bool) FieldErrors {
	var errs FieldErrors
	if !ok {
		return nil
	}
	for _, name := range []string{keylayout.VarLimit, keylayout.VarSlot, keylayout.VarRequestID} {
		if strings.Contains(tag, "${"+name+"}") {
			errs.add(field, "%q has ${%s} inside its hash tag {%s}: the keys of one call would land on different Cluster slots; keep ${%s} outside the braces",
				t, name, tag, name)
		}
	}
	return errs
}

// delimiters are the characters that may follow each variable so that every key can be read
// back into its variable values unambiguously: no encoded value contains ':' or '}', and
// the Kubernetes names and limit names that fill ${namespace}, ${policy}, ${limit} and
// ${slot} contain no '/' either. Untrusted values (identity, request id) may contain '/'.
var delimiters = map[string]string{
	keylayout.VarIdentity: ":}", keylayout.VarRequestID: ":}",
	keylayout.VarNamespace: ":}/", keylayout.VarPolicy: ":}/", keylayout.VarLimit: ":}/", keylayout.VarSlot: ":}/",
}

// checkDelimited requires each variable to end the template or be followed by one of its
// delimiters, so distinct values (say limit "a" with identity "b1" and limit "ab" with
// identity "1") can never build the same key.
func checkDelimited(t *keylayout.Template) error {
	src := t.String()
	for name, delims := range delimiters {
		ref := "${" + name + "}"
		for off := 0; ; {
			i := strings.Index(src[off:], ref)
			if i < 0 {
				break
			}
			end := off + i + len(ref)
			if end < len(src) && !strings.ContainsRune(delims, rune(src[end])) {
				return fmt.Errorf("%q: ${%s} must be followed by %s or end the key, not %q, so that distinct values cannot build the same key",
					src, name, orList(delims), src[end])
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

// orList renders ":}/" as "':', '}' or '/'".
func orList(chars string) string {
	quoted := make([]string, len(chars))
	for i := range chars {
		quoted[i] = "'" + chars[i:i+1] + "'"
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}
