package requestread

import (
	"net/http"
	"strings"
)

// methodOverrideHeaders are the headers frameworks (Rails, Laravel, Spring's
// HiddenHttpMethodFilter behind a proxy, Express method-override, ASP.NET) read to run
// another method's handler for a POST.
var methodOverrideHeaders = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// MethodOverrides are the methods h asks the upstream to run instead of the one sent,
// upper-cased: a POST with X-HTTP-Method-Override: DELETE runs the DELETE handler on many
// frameworks, so a DELETE policy must govern it. A header sent twice is ErrRepeatedHeader.
func MethodOverrides(h http.Header) ([]string, error) {
	var out []string
	for _, name := range methodOverrideHeaders {
		v, ok, err := Header(h, name)
		if err != nil {
			return nil, err
		}
		if ok && v != "" {
			out = append(out, UpperASCII(strings.TrimSpace(v)))
		}
	}
	return out, nil
}

// UpperASCII upper-cases ASCII letters only: methods are tokens, and an upstream that reads
// them case-insensitively serves "post" as POST.
func UpperASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'a' <= b[j] && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
