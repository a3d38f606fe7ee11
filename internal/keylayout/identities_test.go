package keylayout

import (
	"strings"
	"testing"
)

// TestIdentityPatternReadsBack: for identities of every encoded form, the key a template
// expands matches its pattern (as Redis globs: checked with a literal prefix/suffix match
// here) and reads back as the encoded identity, which decodes to the raw identity unless it
// is the hashed form; keys of another policy or limit do not read back.
func TestIdentityPatternReadsBack(t *testing.T) {
	for _, src := range []string{
		"{rl:${namespace}/${policy}:${identity}}:${limit}",
		"{rl:${namespace}/${policy}:${identity}}:${limit}:${identity}",
	} {
		tpl := MustParse(src)
		v := Values{Namespace: "shop", Policy: "orders", Limit: "minute"}
		p, ok := tpl.IdentityPattern(v)
		if !ok || p.Match != "{rl:shop/orders:*}:minute"+map[bool]string{true: ":*", false: ""}[strings.Count(src, "identity") == 2] {
			t.Fatalf("%s: pattern %+v", src, p)
		}
		for _, raw := range []string{"alice", "a b:{c}", "", "ü", strings.Repeat("x", 200)} {
			v.Identity = raw
			enc, ok := p.Identity(tpl.Expand(&v))
			if !ok || enc != EncodeValue(raw) {
				t.Fatalf("%s, %q: read %q %v, want %q", src, raw, enc, ok, EncodeValue(raw))
			}
			back, ok := DecodeValue(enc)
			if hashed := len(enc) > 0 && enc[0] == '#'; ok == hashed || ok && back != raw {
				t.Fatalf("%s, %q: decoded %q %v", src, raw, back, ok)
			}
		}
		for _, other := range []Values{{Namespace: "shop", Policy: "orders2", Identity: "a", Limit: "minute"},
			{Namespace: "shop", Policy: "orders", Identity: "a", Limit: "hour"}} {
			if enc, ok := p.Identity(tpl.Expand(&other)); ok {
				t.Fatalf("%s: %+v read back as %q", src, other, enc)
			}
		}
	}
	if _, ok := MustParse("{rl:${namespace}/${policy}}:x").IdentityPattern(Values{}); ok {
		t.Fatal("a template without ${identity} has no identity pattern")
	}
	if _, ok := DecodeValue("a%zz"); ok {
		t.Fatal("text EncodeValue never writes must not decode")
	}
}
