package snapshot_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

const testNamespace = "shop"

// apiPolicy is a valid stored policy (as the API server would hold it without the webhook):
// per API key, requests per period on /api, with the given algorithm.
func apiPolicy(name string, alg v1alpha1.Algorithm, requests int64, period time.Duration) *v1alpha1.RateLimitPolicy {
	return policytest.New(testNamespace, name, policytest.Paths("/api/"+name),
		policytest.OnMissing(v1alpha1.MissingIdentityShared), policytest.Algorithm(alg),
		policytest.Limit("per-period", requests, period), policytest.FailureMode(v1alpha1.FailureModeFailOpen))
}

// sample is an unsealed snapshot of three policies using two scripts.
func sample(t testing.TB) *snapshot.Snapshot {
	t.Helper()
	s := &snapshot.Snapshot{
		Namespace: testNamespace,
		Redis:     snapshot.Redis{Mode: "standalone", Addrs: []string{"redis.shop.svc:6379"}},
	}
	for _, p := range []*v1alpha1.RateLimitPolicy{
		apiPolicy("a-orders", v1alpha1.AlgorithmTokenBucket, 10, time.Second),
		apiPolicy("b-search", v1alpha1.AlgorithmSlidingWindow, 100, time.Minute),
		apiPolicy("c-login", v1alpha1.AlgorithmTokenBucket, 5, time.Minute),
	} {
		e := snapshottest.Entry(t, p)
		s.Policies = append(s.Policies, e)
		if len(s.Scripts) == 0 || s.Scripts[len(s.Scripts)-1].Name != e.Script {
			s.Scripts = append(s.Scripts, snapshot.Script{Name: e.Script, SHA: e.SHA})
		}
	}
	return s
}

// sealed returns the canonical bytes of a sealed sample.
func sealed(t testing.TB, s *snapshot.Snapshot) []byte {
	t.Helper()
	if err := s.Seal(); err != nil {
		t.Fatalf("seal: %v", err)
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func TestSealMarshalDeterministic(t *testing.T) {
	first := sealed(t, sample(t))
	for i := range 20 {
		if again := sealed(t, sample(t)); !bytes.Equal(first, again) {
			t.Fatalf("round %d: same input, different bytes:\n%s\n%s", i, first, again)
		}
	}
	s := sample(t)
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if s.SchemaVersion != snapshot.SchemaVersion {
		t.Errorf("schemaVersion %d, want %d", s.SchemaVersion, snapshot.SchemaVersion)
	}
	if len(s.Version) != 16 || strings.Trim(s.Version, "0123456789abcdef") != "" {
		t.Errorf("version %q is not 16 hex characters", s.Version)
	}
	// Sealing twice is stable, and the version covers the content only.
	v := s.Version
	if err := s.Seal(); err != nil || s.Version != v {
		t.Errorf("second seal: version %q (err %v), want %q", s.Version, err, v)
	}
	for name, edit := range map[string]func(*snapshot.Snapshot){
		"requests":    func(s *snapshot.Snapshot) { s.Policies[0].Limits[0].Requests++ },
		"redis addrs": func(s *snapshot.Snapshot) { s.Redis.Addrs[0] = "other:6379" },
		"script sha":  func(s *snapshot.Snapshot) { s.Scripts[0].SHA = strings.Repeat("0", 40) },
		"drop policy": func(s *snapshot.Snapshot) { s.Policies = s.Policies[1:] },
	} {
		c := sample(t)
		edit(c)
		if err := c.Seal(); err != nil {
			t.Fatal(err)
		}
		if c.Version == v {
			t.Errorf("%s: changing the content kept version %s", name, v)
		}
	}
}

func TestParseAcceptsSealed(t *testing.T) {
	s := sample(t)
	data := sealed(t, s)
	got, err := snapshot.Parse(data)
	if err != nil {
		t.Fatalf("Parse refused a sealed snapshot: %v\n%s", err, data)
	}
	if got.Version != s.Version || got.Namespace != testNamespace || len(got.Policies) != 3 {
		t.Fatalf("parsed %+v, want version %s with 3 policies", got, s.Version)
	}
	again, err := got.Marshal()
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("re-marshal differs (err %v):\n%s\n%s", err, data, again)
	}
	// An empty namespace snapshot (no policies) is a valid document too.
	empty := &snapshot.Snapshot{Namespace: testNamespace, Redis: s.Redis, Scripts: []snapshot.Script{}, Policies: []snapshot.Entry{}}
	if _, err := snapshot.Parse(sealed(t, empty)); err != nil {
		t.Fatalf("Parse refused an empty sealed snapshot: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	good := sealed(t, sample(t))
	// reseal edits the decoded document and seals it again, so only the edit is wrong.
	reseal := func(edit func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	uncompilable := sample(t)
	uncompilable.Policies[1].StateKey = "{rl:${identity}x}:${limit}" // ${identity} runs into text
	uncompilableTTL := sample(t)
	uncompilableTTL.Policies[2].TTLMs = 1 // shorter than the horizon
	unknownScript := sample(t)
	unknownScript.Policies[0].Algorithm = "LeakyBucket"
	twice := sample(t)
	twice.Policies = append(twice.Policies, twice.Policies[0])
	// A policy that does not compile is not the document's fault: Parse accepts the
	// document, and each reader refuses that policy alone (the sidecar keeps the rest).
	for name, doc := range map[string]*snapshot.Snapshot{"layout": uncompilable, "ttl": uncompilableTTL, "algorithm": unknownScript} {
		parsed, err := snapshot.Parse(sealed(t, doc))
		if err != nil {
			t.Fatalf("%s: a document with one uncompilable policy refused whole: %v", name, err)
		}
		bad := 0
		for i := range parsed.Policies {
			if _, err := limiterspec.Compile(parsed.Namespace, parsed.Policies[i], false); err != nil {
				bad++
			}
		}
		if bad != 1 {
			t.Errorf("%s: %d policies do not compile, want exactly the broken one", name, bad)
		}
	}

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"unknown schemaVersion", reseal(func(m map[string]any) { m["schemaVersion"] = 2 }), "schema version 2"},
		{"missing schemaVersion", reseal(func(m map[string]any) { delete(m, "schemaVersion") }), "schema version 0"},
		{"edited content", bytes.Replace(good, []byte(`"requests":10`), []byte(`"requests":11`), 1), "does not match its content"},
		{"edited redis", bytes.Replace(good, []byte("redis.shop.svc"), []byte("redis.evil.svc"), 1), "does not match its content"},
		{"edited version", reseal(func(m map[string]any) { m["version"] = "0000000000000000" }), "does not match its content"},
		{"truncated", good[:len(good)/2], "decode snapshot"},
		{"truncated by one byte", good[:len(good)-1], "decode snapshot"},
		{"empty", nil, "decode snapshot"},
		{"not an object", []byte(`[1,2,3]`), "decode snapshot"},
		{"policy named twice", sealed(t, twice), `snapshot policy "a-orders" appears twice`},
	}
	if !bytes.Contains(good, []byte(`"requests":10`)) || !bytes.Contains(good, []byte("redis.shop.svc")) {
		t.Fatalf("sample does not hold the bytes the edits expect:\n%s", good)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := snapshot.Parse(c.data)
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if got != nil {
				t.Errorf("returned a snapshot with the error %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
