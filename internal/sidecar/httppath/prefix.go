package httppath

import "strings"

// Prefix is a path prefix compiled for matching whole segments. The zero Prefix matches
// nothing.
type Prefix struct {
	key string // the prefix's match key without a trailing slash: "" for "/"
	ok  bool   // false when the prefix is refused as a path: it matches nothing
}

// NewPrefix compiles a policy's path prefix: normalized and keyed as a request path is, so
// "/%6Cogin", "/x/../login" and "/LOGIN" are the prefix /login. A prefix refused as a path
// (one holding "%2F", say) matches no path, since every path it could name is refused too.
func NewPrefix(prefix string) Prefix {
	p, err := Parse(prefix)
	if err != nil {
		return Prefix{}
	}
	return Prefix{key: strings.TrimSuffix(p.key, "/"), ok: true}
}

// Matches reports whether p matches path on whole segments: "/api" matches "/api", "/api/"
// and "/api/x", not "/apix"; "/" matches every path. The asterisk-form matches no prefix.
func (p Prefix) Matches(path Path) bool {
	k := path.key // "" only for the asterisk-form and the zero Path
	return p.ok && k != "" && strings.HasPrefix(k, p.key) && (len(k) == len(p.key) || k[len(p.key)] == '/')
}

// String is the prefix as it matches: normalized, in lower case, without a trailing slash,
// "/" for the prefix of every path; "" for a prefix that matches nothing.
func (p Prefix) String() string {
	switch {
	case !p.ok:
		return ""
	case p.key == "":
		return "/"
	}
	return p.key
}
