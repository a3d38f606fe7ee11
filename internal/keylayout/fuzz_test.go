package keylayout

import (
	"strings"
	"testing"
)

func FuzzEncodeValue(f *testing.F) {
	for _, s := range []string{"alice", "{", "}{", "a\r\nb", "\x00", "%41", "#", ":", "日本", strings.Repeat("{", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		enc := EncodeValue(raw)
		if err := checkEncoded(raw, enc); err != nil {
			t.Fatal(err)
		}
		if got := string(appendEncoded([]byte("p:"), raw)); got != "p:"+enc {
			t.Fatalf("appendEncoded = %q, want %q", got, "p:"+enc)
		}
		// Injectivity against near neighbors: one byte changed, added or removed.
		for _, other := range neighbors(raw) {
			if EncodeValue(other) == enc {
				t.Fatalf("EncodeValue(%q) == EncodeValue(%q) == %q", raw, other, enc)
			}
		}
	})
}

func FuzzExpandSlot(f *testing.F) {
	f.Add("alice", "bob")
	f.Add("{a}", "%7Ba%7D")
	f.Add("", "\x00")
	f.Add("a\r\n", "a%0D%0A")
	f.Add(strings.Repeat("x", 129), strings.Repeat("x", 128))
	templates := []*Template{
		MustParse(typical),
		MustParse("rl:{${identity}}:${limit}:${slot}"),
		MustParse("rl:${identity}:${slot}"),
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, tmpl := range templates {
			va := &Values{Namespace: "ns", Policy: "p", Identity: a, Limit: "l", Slot: "0"}
			vb := &Values{Namespace: "ns", Policy: "p", Identity: b, Limit: "l", Slot: "0"}
			ka, kb := tmpl.Expand(va), tmpl.Expand(vb)
			if (ka == kb) != (a == b) {
				t.Fatalf("%s: identities %q and %q expand to %q and %q", tmpl, a, b, ka, kb)
			}
			for _, c := range []struct {
				v   *Values
				key string
			}{{va, ka}, {vb, kb}} {
				if err := checkKey(tmpl, c.v, c.key); err != nil {
					t.Fatal(err)
				}
				if got := string(tmpl.AppendExpand(nil, c.v)); got != c.key {
					t.Fatalf("AppendExpand = %q, Expand = %q", got, c.key)
				}
			}
			if err := checkEncoded(a, EncodeValue(a)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// neighbors returns strings that differ from s by one byte: its last byte flipped, a byte
// appended, and its last byte removed.
func neighbors(s string) []string {
	out := []string{s + "\x00", s + "%"}
	if n := len(s); n > 0 {
		out = append(out, s[:n-1], s[:n-1]+string([]byte{s[n-1] ^ 0x01}))
	}
	return out
}
