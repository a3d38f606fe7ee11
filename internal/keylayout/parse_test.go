package keylayout

import (
	"slices"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	long := "rl:" + strings.Repeat("x", MaxTemplateLen-2)
	tests := []struct {
		name    string
		src     string
		allowed []string
		want    []string // fragments of the error message
	}{
		{"unknown variable", "rl:${user}", nil,
			[]string{`unknown variable "user" at offset 3`, "allowed: identity, limit, namespace, policy, requestId, slot"}},
		{"unknown variable is case-sensitive", "${Identity}", nil, []string{`unknown variable "Identity" at offset 0`}},
		{"empty variable", "rl:${}", nil, []string{`empty variable name "${}" at offset 3`}},
		{"dollar without brace", "rl:$x", nil, []string{`'$' at offset 3 is not followed by '{'`}},
		{"trailing dollar", "rl:${identity}:$", nil, []string{`'$' at offset 15 is not followed by '{'`}},
		{"double dollar", "$${identity}", nil, []string{`'$' at offset 0 is not followed by '{'`}},
		{"unterminated variable", "rl:${identity", nil, []string{`unterminated variable "${identity" at offset 3`, "missing '}'"}},
		{"unterminated empty variable", "rl:${", nil, []string{`unterminated variable "${" at offset 3`}},
		{"invalid byte in name", "${identity:x}", nil, []string{`invalid byte ':' at offset 10`, "variable at offset 0"}},
		{"brace in name", "${iden{tity}}", nil, []string{`invalid byte '{' at offset 6`}},
		{"close before open", "rl}:{x", nil, []string{`unbalanced '}' at offset 2`, "no '{' before it"}},
		{"close after tag", "{a}}", nil, []string{`unbalanced '}' at offset 3`}},
		{"close after variable", "${identity}}", nil, []string{`unbalanced '}' at offset 11`}},
		{"nested", "{a{b}}", nil, []string{`nested '{' at offset 2`, `'{' at offset 0 is not closed`}},
		{"unclosed", "{rl:${identity}", nil, []string{`unclosed '{' at offset 0`}},
		{"second tag unclosed", "{a}:{b", nil, []string{`unclosed '{' at offset 4`}},
		{"too long", long, nil, []string{"too long: 513 bytes", "maximum is 512", "offset 512"}},
		{"empty template", "", nil, []string{"empty key template"}},
		{"disallowed variable", "idem:${requestId}", []string{VarIdentity, VarLimit},
			[]string{`variable "requestId" at offset 5 is not allowed here`, "(allowed: identity, limit)"}},
		{"unknown with allowed set", "${user}", []string{VarSlot, VarIdentity},
			[]string{`unknown variable "user" at offset 0 (allowed: identity, slot)`}},
		{"unknown name in allowed", "rl", []string{"user"}, []string{`allowed variable "user" is not a known variable`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Parse(tc.src, tc.allowed...)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error", tc.src, tmpl)
			}
			for _, frag := range tc.want {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("Parse(%q) error %q does not contain %q", tc.src, err, frag)
				}
			}
		})
	}
}

func TestParseAccepted(t *testing.T) {
	tests := []struct {
		src     string
		allowed []string
		vars    []string
		tag     string
		hasTag  bool
	}{
		{"{rl:${namespace}/${policy}:${identity}}:${limit}:${slot}", nil,
			[]string{VarIdentity, VarLimit, VarNamespace, VarPolicy, VarSlot}, "rl:${namespace}/${policy}:${identity}", true},
		{"rl:${namespace}:${policy}:${identity}", nil, []string{VarIdentity, VarNamespace, VarPolicy}, "", false},
		{"plain", nil, nil, "", false},
		{"{}rl:${identity}", nil, []string{VarIdentity}, "", false},
		{"{}{a}", nil, nil, "", false},
		{"a{b}c{d}", nil, nil, "b", true},
		{"rl:{${identity}}", nil, []string{VarIdentity}, "${identity}", true},
		{"idem:{${namespace}}:${requestId}", []string{VarNamespace, VarRequestID},
			[]string{VarNamespace, VarRequestID}, "${namespace}", true},
		{"${identity}${identity}:${slot}", nil, []string{VarIdentity, VarSlot}, "", false},
		{strings.Repeat("k", MaxTemplateLen), nil, nil, "", false},
	}
	for _, tc := range tests {
		tmpl, err := Parse(tc.src, tc.allowed...)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.src, err)
			continue
		}
		if got := tmpl.String(); got != tc.src {
			t.Errorf("String() = %q, want %q", got, tc.src)
		}
		if got := tmpl.Vars(); !slices.Equal(got, tc.vars) {
			t.Errorf("%q: Vars() = %q, want %q", tc.src, got, tc.vars)
		}
		for _, name := range varNames {
			if got, want := tmpl.Uses(name), slices.Contains(tc.vars, name); got != want {
				t.Errorf("%q: Uses(%q) = %v, want %v", tc.src, name, got, want)
			}
		}
		if tag, ok := tmpl.HashTag(); tag != tc.tag || ok != tc.hasTag {
			t.Errorf("%q: HashTag() = %q, %v; want %q, %v", tc.src, tag, ok, tc.tag, tc.hasTag)
		}
	}
}

func TestUsesUnknownName(t *testing.T) {
	tmpl := MustParse("rl:${identity}")
	if tmpl.Uses("user") || tmpl.Uses("") {
		t.Error("Uses reports an unknown variable as used")
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustParse of an invalid template did not panic")
		}
	}()
	MustParse("rl:${user}")
}
