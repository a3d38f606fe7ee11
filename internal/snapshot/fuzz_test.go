package snapshot_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic, and whatever it accepts must
// re-marshal into a document that Parse accepts again with the same version and that is
// already canonical (marshalling it once more gives the same bytes). The committed corpus
// under testdata/fuzz/FuzzParse holds sealed snapshots of every algorithm and near misses.
func FuzzParse(f *testing.F) {
	f.Add(sealed(f, sample(f)))
	f.Add([]byte(`{"schemaVersion":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
		// The version check stops almost every mutation before the policies are compiled;
		// sealing the decoded document lets arbitrary policies reach the compile step too.
		var s snapshot.Snapshot
		if json.Unmarshal(data, &s) == nil && s.Seal() == nil {
			if resealed, err := s.Marshal(); err == nil {
				checkParse(t, resealed)
			}
		}
	})
}

// checkParse parses data and, when accepted, checks the round trip.
func checkParse(t *testing.T, data []byte) {
	t.Helper()
	s, err := snapshot.Parse(data)
	if err != nil {
		if s != nil {
			t.Fatalf("Parse returned a snapshot with error %v", err)
		}
		return
	}
	canonical, err := s.Marshal()
	if err != nil {
		t.Fatalf("accepted snapshot does not marshal: %v", err)
	}
	again, err := snapshot.Parse(canonical)
	if err != nil {
		t.Fatalf("re-marshalled snapshot refused: %v\ninput: %q\ncanonical: %s", err, data, canonical)
	}
	if again.Version != s.Version {
		t.Fatalf("version changed across a round trip: %s -> %s", s.Version, again.Version)
	}
	twice, err := again.Marshal()
	if err != nil || !bytes.Equal(twice, canonical) {
		t.Fatalf("canonical form is not stable (err %v):\n%s\n%s", err, canonical, twice)
	}
}

// TestFuzzCorpusSealedAccepted keeps the committed corpus honest: the sealed-* seeds are
// accepted (so the fuzzer starts from the accept path), every other seed is refused.
func TestFuzzCorpusSealedAccepted(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParse", "*"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("corpus missing (%d files, err %v)", len(paths), err)
	}
	accepted := 0
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a go fuzz v1 file", p)
		}
		quoted, ok := strings.CutPrefix(lines[1], "[]byte(")
		quoted, ok2 := strings.CutSuffix(quoted, ")")
		data, err := strconv.Unquote(quoted)
		if !ok || !ok2 || err != nil {
			t.Fatalf("%s: cannot decode the value (%v)", p, err)
		}
		_, err = snapshot.Parse([]byte(data))
		want := strings.HasPrefix(filepath.Base(p), "sealed-")
		if (err == nil) != want {
			t.Errorf("%s: Parse error %v, want accepted=%v", p, err, want)
		}
		if err == nil {
			accepted++
		}
	}
	t.Logf("%d seeds, %d accepted", len(paths), accepted)
}
