package limiter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// checkLayout enforces what the scripts need of the key templates: distinct keys for each
// limit and window slot, one shared non-empty hash tag for every key of a call (one Cluster
// slot), and untrusted values that cannot run into the text after them.
func checkLayout(c PolicyConfig, state, idem *keylayout.Template) error {
	if len(c.Limits) > 1 && !state.Uses(keylayout.VarLimit) {
		return fmt.Errorf("state key %q must use ${%s}: with %d limits each needs its own key",
			state, keylayout.VarLimit, len(c.Limits))
	}
	if c.Algorithm == SlidingWindow && !state.Uses(keylayout.VarSlot) {
		return fmt.Errorf("state key %q must use ${%s}: SlidingWindow keeps two window slots per limit",
			state, keylayout.VarSlot)
	}
	if err := checkDelimited(state); err != nil {
		return fmt.Errorf("state key: %w", err)
	}
	multiKey := len(c.Limits) > 1 || c.Algorithm == SlidingWindow || idem != nil
	tag, ok := state.HashTag()
	if multiKey && !ok {
		return fmt.Errorf("state key %q has no hash tag: a call touches several keys, which must share one {tag} to stay on one Cluster slot", state)
	}
	if idem == nil {
		return nil
	}
	if !idem.Uses(keylayout.VarRequestID) {
		return fmt.Errorf("idempotency key %q must use ${%s}", idem, keylayout.VarRequestID)
	}
	if err := checkDelimited(idem); err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	if itag, _ := idem.HashTag(); itag != tag {
		return fmt.Errorf("idempotency key %q has hash tag {%s}, state key %q has {%s}: they must share one tag",
			idem, itag, state, tag)
	}
	return nil
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

var errNoLayout = errors.New("state key template is required")
