package keylayout

import (
	"strings"
	"testing"
)

// benchIdentities are the identity shapes the benchmarks cover.
var benchIdentities = []struct{ name, identity string }{
	{"safe", "user-42@example.com"},
	{"hostile", "{evil}:\r\nSET x 1\x00"},
	{"long", strings.Repeat("k", 300)},
}

func BenchmarkExpand(b *testing.B) {
	tmpl := MustParse(typical)
	for _, bc := range benchIdentities {
		v := &Values{Namespace: "team-a", Policy: "api", Identity: bc.identity, Limit: "per-second", Slot: "1"}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = tmpl.Expand(v)
			}
		})
	}
}

func BenchmarkAppendExpand(b *testing.B) {
	tmpl := MustParse(typical)
	buf := make([]byte, 0, 256)
	for _, bc := range benchIdentities {
		v := &Values{Namespace: "team-a", Policy: "api", Identity: bc.identity, Limit: "per-second", Slot: "1"}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = tmpl.AppendExpand(buf[:0], v)
			}
		})
	}
}

func BenchmarkSlot(b *testing.B) {
	for _, bc := range []struct{ name, key string }{
		{"tagged", "{rl:team-a/api:user-42@example.com}:per-second:1"},
		{"untagged", "rl:team-a:api:user-42@example.com:per-second:1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Slot(bc.key)
			}
		})
	}
}

func BenchmarkEncodeValue(b *testing.B) {
	for _, bc := range benchIdentities {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = EncodeValue(bc.identity)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Parse(typical)
	}
}
