package responsecost_test

import (
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/responsecost"
)

// TestSourceValidate accepts well-formed sources and names the field of each mistake.
func TestSourceValidate(t *testing.T) {
	for _, tc := range []struct {
		src  responsecost.Source
		want string // a substring of the error, "" for none
	}{
		{responsecost.Source{Header: "X-Tokens"}, ""},
		{responsecost.Source{Field: "usage.total_tokens"}, ""},
		{responsecost.Source{Header: "x-usage_tokens", Field: "tokens"}, ""},
		{responsecost.Source{Field: strings.Repeat("a.", 7) + "a"}, ""},
		{responsecost.Source{Field: "usage.total tokens.é"}, ""},
		{responsecost.Source{}, "header, field: at least one"},
		{responsecost.Source{Header: "X Tokens"}, "header: "},
		{responsecost.Source{Header: "X-Tökens"}, "header: "},
		{responsecost.Source{Header: "X:Tokens"}, "header: "},
		{responsecost.Source{Header: strings.Repeat("x", 257)}, "header: at most 256 bytes"},
		{responsecost.Source{Field: "usage..total_tokens"}, "field: "},
		{responsecost.Source{Field: ".usage"}, "segment 1: empty"},
		{responsecost.Source{Field: "usage."}, "segment 2: empty"},
		{responsecost.Source{Field: strings.Repeat("a.", 8) + "a"}, "field: \"a.a.a.a.a.a.a.a.a\": at most 8 segments, got 9"},
		{responsecost.Source{Field: strings.Repeat("a", 257)}, "field: at most 256 bytes"},
		{responsecost.Source{Field: `usage."total"`}, "field: "},
		{responsecost.Source{Field: `usage\total`}, "field: "},
		{responsecost.Source{Field: "usage\ntotal"}, "field: "},
		{responsecost.Source{Field: "usage.\xff"}, "not valid UTF-8"},
		{responsecost.Source{Header: "X-Tokens", Field: "a..b"}, "field: "},
	} {
		err := tc.src.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want no error", tc.src, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error with %q", tc.src, err, tc.want)
		}
	}
}

// TestWatchInvalidSource: a source that does not validate reads what of it is valid, and
// still calls done once.
func TestWatchInvalidSource(t *testing.T) {
	h := header("Content-Type", jsonType, "X Tokens", "5")
	body := []byte(usageJSON("21"))
	watchAll(t, h, body, chunkings[0].wrap, responsecost.Source{Header: "X Tokens", Field: "usage..total_tokens"}).check(t, 0, false)
	watchAll(t, h, body, chunkings[0].wrap, responsecost.Source{Header: "X Tokens", Field: "usage.total_tokens"}).check(t, 21, true)
	watchAll(t, h, body, chunkings[0].wrap, responsecost.Source{}).check(t, 0, false)
}
