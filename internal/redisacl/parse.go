package redisacl

import (
	"slices"
	"strings"
)

// observed is one user as ACL LIST describes it on a node.
type observed struct {
	name      string
	on        bool
	nopass    bool
	hashes    []string
	keys      []string // with their ~ or %R~/%W~/%RW~ form
	channels  []string // &patterns and resetchannels
	commands  []string // +/- rules
	selectors bool
}

// parseACLList reads ACL LIST lines ("user <name> <rules...>") into users by name. Lines
// that are not users are skipped.
func parseACLList(lines []string) map[string]observed {
	out := make(map[string]observed, len(lines))
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" {
			continue
		}
		out[f[1]] = parseRules(f[1], f[2:])
	}
	return out
}

// parseRules sorts one user's rules by kind. Flags the operator does not set
// (sanitize-payload, skip-sanitize-payload) carry no permission and are ignored.
func parseRules(name string, rules []string) observed {
	o := observed{name: name}
	for _, r := range rules {
		switch {
		case r == "on":
			o.on = true
		case r == "off":
			o.on = false
		case r == "nopass":
			o.nopass = true
		case strings.HasPrefix(r, "#"):
			o.hashes = append(o.hashes, r[1:])
		case strings.HasPrefix(r, "~"), strings.HasPrefix(r, "%"), r == "allkeys":
			o.keys = append(o.keys, r)
		case strings.HasPrefix(r, "&"), r == "resetchannels", r == "allchannels":
			o.channels = append(o.channels, r)
		case strings.HasPrefix(r, "+"), strings.HasPrefix(r, "-"), r == "allcommands", r == "nocommands":
			o.commands = append(o.commands, r)
		case strings.HasPrefix(r, "("):
			o.selectors = true
		}
	}
	return o
}

// matches reports whether the user on the node grants exactly what u wants: enabled, with
// exactly u's passwords, keys and commands, no channels and no selectors. Rule order is not
// compared: Redis lists commands in its own order, and with -@all followed only by grants
// the order changes nothing.
func (o observed) matches(u User) bool {
	if !o.on || o.nopass || o.selectors || !slices.Equal(o.channels, []string{"resetchannels"}) {
		return false
	}
	keys := make([]string, len(u.KeyPatterns))
	for i, k := range u.KeyPatterns {
		keys[i] = "~" + k
	}
	commands := []string{"-@all"}
	for _, c := range u.Commands {
		commands = append(commands, "+"+c)
	}
	return sameSet(o.hashes, u.PasswordHashes) && sameSet(o.keys, keys) && sameSet(o.commands, commands)
}

// sameSet reports whether a and b hold the same strings, ignoring order and repeats.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}
