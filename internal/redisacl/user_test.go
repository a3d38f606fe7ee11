package redisacl

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestKeyPattern(t *testing.T) {
	for _, c := range []struct {
		prefix, ns, want, wantErr string
	}{
		{"", "shop", "{rl:shop/*", ""},
		{"rl:", "shop", "{rl:shop/*", ""},
		{"acme.rl-1:", "team-a", "{acme.rl-1:team-a/*", ""},
		{"rl*:", "shop", "", "key prefix"},
		{"rl:", "sh?p", "", "namespace"},
		{"r{l:", "shop", "", "key prefix"},
		{"rl:", "", "", "namespace"},
		{"rl:", "a/b", "", "namespace"},
	} {
		got, err := KeyPattern(c.prefix, c.ns)
		switch {
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("KeyPattern(%q, %q) = %q, %v; want %q", c.prefix, c.ns, got, err, c.want)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("KeyPattern(%q, %q) = %q, %v; want an error naming the %s", c.prefix, c.ns, got, err, c.wantErr)
		}
	}
}

// TestNewPassword: 32 random bytes each, in base64url, never repeating in 1000 draws.
func TestNewPassword(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		p, err := NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil || len(raw) != PasswordBytes || len(p) != 43 {
			t.Fatalf("password %q: %d bytes (%v); want %d in 43 base64url characters", p, len(raw), err, PasswordBytes)
		}
		if seen[p] {
			t.Fatalf("password %q drawn twice", p)
		}
		seen[p] = true
	}
}

func TestHashPassword(t *testing.T) {
	// printf %s pa55 | sha256sum
	if got := HashPassword("pa55"); got != "6fcb5c247e745f625b524676ff53a8280d309762f246385973f32830fe311a0a" {
		t.Fatalf("HashPassword = %s", got)
	}
}

func TestValidate(t *testing.T) {
	good := User{Name: "ratelimit-ns-a", PasswordHashes: []string{HashPassword("x")}, KeyPatterns: []string{"{rl:a/*"},
		Commands: []string{"ping"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid user refused: %v", err)
	}
	for name, edit := range map[string]func(*User){
		"no name":        func(u *User) { u.Name = "" },
		"space in name":  func(u *User) { u.Name = "a b" },
		"no password":    func(u *User) { u.PasswordHashes = nil },
		"clear password": func(u *User) { u.PasswordHashes = []string{"pa55"} },
		"upper hex":      func(u *User) { u.PasswordHashes = []string{strings.ToUpper(HashPassword("x"))} },
		"no key":         func(u *User) { u.KeyPatterns = nil },
		"space in key":   func(u *User) { u.KeyPatterns = []string{"{rl:a/* ~*"} },
		"no command":     func(u *User) { u.Commands = nil },
		"empty command":  func(u *User) { u.Commands = []string{""} },
	} {
		u := good
		u.PasswordHashes, u.KeyPatterns, u.Commands = append([]string(nil), u.PasswordHashes...),
			append([]string(nil), u.KeyPatterns...), append([]string(nil), u.Commands...)
		edit(&u)
		if err := u.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, u)
		}
	}
}

// TestMatches reads ACL LIST lines as Redis 7.0 writes them (commands in its own order,
// sanitize-payload) and tells a user as wanted from every way it can differ.
func TestMatches(t *testing.T) {
	h1, h2 := HashPassword("one"), HashPassword("two")
	want := User{Name: "ratelimit-ns-a", PasswordHashes: []string{h1, h2}, KeyPatterns: []string{"{rl:a/*"},
		Commands: []string{"ping", "eval", "mget"}}
	base := "user ratelimit-ns-a on sanitize-payload #" + h2 + " #" + h1 + " ~{rl:a/* resetchannels -@all +mget +ping +eval"
	if got := parseACLList([]string{base})["ratelimit-ns-a"]; !got.matches(want) {
		t.Fatalf("%q does not match %+v", base, want)
	}
	for name, line := range map[string]string{
		"off":            strings.Replace(base, " on ", " off ", 1),
		"nopass":         base + " nopass",
		"one password":   strings.Replace(base, " #"+h1, "", 1),
		"extra password": base + " #" + HashPassword("three"),
		"wider keys":     base + " ~*",
		"other keys":     strings.Replace(base, "~{rl:a/*", "~{rl:b/*", 1),
		"a channel":      base + " &*",
		"extra command":  base + " +flushall",
		"lost command":   strings.Replace(base, " +eval", "", 1),
		"all commands":   strings.Replace(base, "-@all", "+@all", 1),
		"a selector":     base + " (~x +get)",
	} {
		if parseACLList([]string{line})["ratelimit-ns-a"].matches(want) {
			t.Errorf("%s: %q matches %+v", name, line, want)
		}
	}
}
