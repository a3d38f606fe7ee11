package keylayout

import (
	"math/rand/v2"
	"strings"
	"testing"
)

const propertyIdentities = 25000

// randomIdentity returns an identity of one of several hostile shapes.
func randomIdentity(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0: // random bytes, sometimes long enough to be hashed
		b := make([]byte, r.IntN(200))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return string(b)
	case 1: // brace-heavy
		return randomFrom(r, "{}{}{}a:%#\r\n\x00$", r.IntN(80))
	case 2: // pass-through bytes only, around the length bound
		return randomFrom(r, "abcXYZ019._@/+=-", MaxEncodedLen-8+r.IntN(16))
	case 3: // separators and escapes that could fake key structure
		return randomFrom(r, ":%#/{}2537BDA", r.IntN(40))
	case 4: // unicode
		return randomFrom(r, "é日本🚦ß\u200b\ufeff", r.IntN(12))
	default: // short, mostly safe
		return randomFrom(r, "abcdefghij-.{", r.IntN(16))
	}
}

// randomFrom returns n bytes or runes drawn from alphabet.
func randomFrom(r *rand.Rand, alphabet string, n int) string {
	runes := []rune(alphabet)
	var b strings.Builder
	for range n {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

// TestPropertyTagSlot checks, for many random identities and templates whose tag holds
// ${identity}, that every key hashes to the slot of its expanded tag and that distinct
// identities never share a key.
func TestPropertyTagSlot(t *testing.T) {
	templates := []*Template{
		MustParse(typical),
		MustParse("rl:{${identity}}:${limit}:${slot}"),
		MustParse("{${namespace}:${identity}:x}${slot}"),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tmpl := range templates {
		keys := make(map[string]string, propertyIdentities)
		for range propertyIdentities {
			id := randomIdentity(r)
			v := &Values{Namespace: "ns", Policy: "pol", Identity: id, Limit: "l", Slot: "1"}
			key := tmpl.Expand(v)
			if err := checkKey(tmpl, v, key); err != nil {
				t.Fatalf("%s: %v", tmpl, err)
			}
			if err := checkEncoded(id, EncodeValue(id)); err != nil {
				t.Fatal(err)
			}
			if prev, dup := keys[key]; dup && prev != id {
				t.Fatalf("%s: identities %q and %q both expand to %q", tmpl, prev, id, key)
			}
			keys[key] = id
		}
		if len(keys) < propertyIdentities/2 {
			t.Fatalf("%s: only %d distinct identities generated", tmpl, len(keys))
		}
	}
}

// TestPropertySameSlotAcrossLimits checks that one identity's keys for every limit and
// window slot land on one hash slot, as a multi-key Lua script needs.
func TestPropertySameSlotAcrossLimits(t *testing.T) {
	tmpl := MustParse(typical)
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		id := randomIdentity(r)
		want := Slot(tmpl.Expand(&Values{Namespace: "ns", Policy: "p", Identity: id}))
		for _, limit := range []string{"a", "per-minute", "{x}", strings.Repeat("z", 300)} {
			for _, slot := range []string{"0", "1"} {
				key := tmpl.Expand(&Values{Namespace: "ns", Policy: "p", Identity: id, Limit: limit, Slot: slot})
				if got := Slot(key); got != want {
					t.Fatalf("identity %q: key %q on slot %d, want %d", id, key, got, want)
				}
			}
		}
	}
}
