package keylayout

import (
	"fmt"
	"strings"
)

// The rules a policy's key templates obey, in their one home: the limiter applies them to
// every policy it compiles, so the admission webhook, the controller and each sidecar refuse
// alike (through limiter.NewPolicy).

// Problem is one thing wrong with a layout: the template it is in ("state" or
// "idempotency") and what is wrong, with what to do.
type Problem struct {
	// Template names the template: "state" or "idempotency".
	Template string
	// Detail says what is wrong and what to do.
	Detail string
}

// Problems are every problem CheckLayout found.
type Problems []Problem

func (p *Problems) add(template, format string, args ...any) {
	*p = append(*p, Problem{Template: template, Detail: fmt.Sprintf(format, args...)})
}

// CheckLayout enforces what the limiter's scripts need of a policy's key templates: distinct
// keys for each limit, one shared non-empty hash tag for every key of a call (one Cluster
// slot), and untrusted values that cannot run into the text after them. state holds one key
// per limit; idem, when not nil, the request-id key. sample holds the namespace, policy and
// first limit used to show the slots two keys would land on.
func CheckLayout(state, idem *Template, limits int, sample Values) Problems {
	var errs Problems
	if limits > 1 && !state.Uses(VarLimit) {
		errs.add("state", "%q must use ${%s}: with %d limits each needs its own key",
			state, VarLimit, limits)
	}
	if err := checkDelimited(state); err != nil {
		errs.add("state", "%v", err)
	}
	errs = append(errs, checkEmptyTag("state", state)...)
	multiKey := limits > 1 || idem != nil
	tag, ok := state.HashTag()
	errs = append(errs, checkTagVars("state", state, tag, ok)...)
	if multiKey && !ok {
		errs.add("state", "%q has no hash tag: a call touches several keys, which must share one non-empty {tag} to stay on one Cluster slot", state)
	}
	if idem != nil {
		errs = append(errs, checkIdempotencyLayout(state, idem, sample)...)
	}
	return errs
}

// checkIdempotencyLayout checks the request-id key: well formed, and on the state key's tag.
func checkIdempotencyLayout(state, idem *Template, sample Values) Problems {
	var errs Problems
	errs = append(errs, checkEmptyTag("idempotency", idem)...)
	if itag, iok := idem.HashTag(); iok {
		errs = append(errs, checkTagVars("idempotency", idem, itag, iok)...)
	}
	if !idem.Uses(VarRequestID) {
		errs.add("idempotency", "%q must use ${%s}", idem, VarRequestID)
	}
	if err := checkDelimited(idem); err != nil {
		errs.add("idempotency", "%v", err)
	}
	tag, ok := state.HashTag()
	if itag, _ := idem.HashTag(); ok && itag != tag {
		sample := withSample(sample)
		errs.add("idempotency", "%q has hash tag {%s} but the state key %q has {%s}: for identity %q they hash to slots %d and %d; every key of a call must share one tag (one Cluster slot)",
			idem, itag, state, tag, sample.Identity, Slot(idem.Expand(sample)), Slot(state.Expand(sample)))
	}
	return errs
}

func checkEmptyTag(field string, t *Template) Problems {
	var errs Problems
	if t.EmptyTag() {
		errs.add(field, "%q starts with the empty hash tag {}, which Redis ignores (it hashes the whole key): put the identity inside, e.g. {rl:${identity}}", t)
		return errs
	}
	if tag, ok := t.HashTag(); ok && !t.TagNeverEmpty(neverEmptyVars...) {
		errs.add(field, "%q has a hash tag {%s} that expands to the empty tag {} when ${%s} is empty (a request without identity, counted as Shared): Redis then hashes whole keys and a call's keys land on different Cluster slots; put literal text or ${%s} in the tag, e.g. {rl:${%s}/${%s}:${identity}}",
			t, tag, VarIdentity, VarNamespace, VarNamespace, VarPolicy)
	}
	return errs
}

// neverEmptyVars are the variables whose values are never empty: Kubernetes names and limit
// names. The identity is empty for the Shared caller, and ${slot} always expands empty.
var neverEmptyVars = []string{VarNamespace, VarPolicy, VarLimit}

// checkTagVars requires the hash tag to be the same for every key of one call: it may use
// ${namespace}, ${policy} and ${identity}, never ${limit}, ${slot} or ${requestId}, which
// vary between the keys of a call and would spread them over several Cluster slots.
func checkTagVars(field string, t *Template, tag string, ok bool) Problems {
	var errs Problems
	if !ok {
		return nil
	}
	for _, name := range []string{VarLimit, VarSlot, VarRequestID} {
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
	VarIdentity: ":}", VarRequestID: ":}",
	VarNamespace: ":}/", VarPolicy: ":}/", VarLimit: ":}/", VarSlot: ":}/",
}

// checkDelimited requires each variable to end the template or be followed by one of its
// delimiters, so distinct values (say limit "a" with identity "b1" and limit "ab" with
// identity "1") can never build the same key.
func checkDelimited(t *Template) error {
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

// withSample completes v with the sample identity, slot and request id shown in messages.
func withSample(v Values) *Values {
	v.Identity, v.Slot, v.RequestID = "alice", "0", "req-1"
	return &v
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
