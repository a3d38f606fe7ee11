package keylayout

import (
	"strings"
	"sync"
	"testing"
)

const typical = "{rl:${namespace}/${policy}:${identity}}:${limit}:${slot}"

func TestExpand(t *testing.T) {
	v := &Values{Namespace: "team-a", Policy: "api", Identity: "alice", Limit: "per-second", Slot: "1", RequestID: "r-1"}
	tests := []struct {
		src  string
		v    *Values
		want string
	}{
		{typical, v, "{rl:team-a/api:alice}:per-second:1"},
		{typical, &Values{Namespace: "team-a", Policy: "api", Identity: "{evil}:x", Limit: "l", Slot: "0"},
			"{rl:team-a/api:%7Bevil%7D%3Ax}:l:0"},
		{typical, &Values{}, "{rl:/:}::"},
		{typical, nil, "{rl:/:}::"},
		{"idem:{${namespace}}:${requestId}", v, "idem:{team-a}:r-1"},
		{"${identity}${identity}", &Values{Identity: "a b"}, "a%20ba%20b"},
		{"static", v, "static"},
		{"x:${identity}", &Values{Identity: strings.Repeat("q", 200)}, "x:" + EncodeValue(strings.Repeat("q", 200))},
	}
	for _, tc := range tests {
		tmpl := MustParse(tc.src)
		if got := tmpl.Expand(tc.v); got != tc.want {
			t.Errorf("%q.Expand(%+v) = %q, want %q", tc.src, tc.v, got, tc.want)
		}
		prefix := []byte("prefix|")
		if got := string(tmpl.AppendExpand(prefix, tc.v)); got != "prefix|"+tc.want {
			t.Errorf("%q.AppendExpand = %q, want %q", tc.src, got, "prefix|"+tc.want)
		}
	}
}

func TestExpandHostileIdentities(t *testing.T) {
	tmpl := MustParse(typical)
	seen := map[string]string{}
	for _, id := range hostileValues {
		v := &Values{Namespace: "ns", Policy: "p", Identity: id, Limit: "l", Slot: "0"}
		key := tmpl.Expand(v)
		if err := checkKey(tmpl, v, key); err != nil {
			t.Error(err)
		}
		if got := string(tmpl.AppendExpand(nil, v)); got != key {
			t.Errorf("AppendExpand = %q, Expand = %q", got, key)
		}
		if prev, dup := seen[key]; dup {
			t.Errorf("identities %.40q and %.40q both expand to %q", id, prev, key)
		}
		seen[key] = id
	}
}

func TestExpandTag(t *testing.T) {
	tests := []struct {
		src, identity, tag string
		ok                 bool
	}{
		{typical, "bob", "rl:ns/p:bob", true},
		{typical, "", "rl:ns/p:", true},
		{"rl:{${identity}}:${slot}", "bob", "bob", true},
		{"rl:{${identity}}:${slot}", "", "", false}, // "rl:{}:0": Redis hashes the whole key
		{"rl:{}:${identity}", "bob", "", false},
		{"rl:${identity}", "bob", "", false},
	}
	for _, tc := range tests {
		tmpl := MustParse(tc.src)
		v := &Values{Namespace: "ns", Policy: "p", Identity: tc.identity, Slot: "0"}
		tag, ok := tmpl.ExpandTag(v)
		if tag != tc.tag || ok != tc.ok {
			t.Errorf("%q.ExpandTag(identity %q) = %q, %v; want %q, %v", tc.src, tc.identity, tag, ok, tc.tag, tc.ok)
		}
		if err := checkKey(tmpl, v, tmpl.Expand(v)); err != nil {
			t.Error(err)
		}
	}
}

func TestExpandAllocs(t *testing.T) {
	tmpl := MustParse(typical)
	tests := []struct {
		identity string
		want     float64
	}{
		{"alice@example.com", 1},
		{"{hostile}:\r\n\x00", 1},
		{strings.Repeat("h", 300), 2}, // hashed: SHA-256 needs a []byte copy of the input
	}
	for _, tc := range tests {
		v := &Values{Namespace: "team-a", Policy: "api", Identity: tc.identity, Limit: "per-second", Slot: "1"}
		if got := testing.AllocsPerRun(200, func() { _ = tmpl.Expand(v) }); got > tc.want {
			t.Errorf("Expand(identity %.20q) allocates %v times, want at most %v", tc.identity, got, tc.want)
		}
	}
	v := &Values{Namespace: "team-a", Policy: "api", Identity: "{hostile}", Limit: "l", Slot: "1"}
	buf := make([]byte, 0, 256)
	if got := testing.AllocsPerRun(200, func() { buf = tmpl.AppendExpand(buf[:0], v) }); got != 0 {
		t.Errorf("AppendExpand into a large enough buffer allocates %v times, want 0", got)
	}
}

// TestTemplateConcurrent expands one template from many goroutines; run with -race.
func TestTemplateConcurrent(t *testing.T) {
	tmpl := MustParse(typical)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				v := &Values{Namespace: "ns", Policy: "p", Identity: strings.Repeat("{", g+i%50), Limit: "l", Slot: "1"}
				key := tmpl.Expand(v)
				if err := checkKey(tmpl, v, key); err != nil {
					t.Error(err)
					return
				}
				_, _ = tmpl.HashTag()
				_ = tmpl.Vars()
			}
		})
	}
	wg.Wait()
}
