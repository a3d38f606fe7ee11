// Package snapshot is the contract between the controller and the sidecars: the compiled
// form of every valid RateLimitPolicy of one namespace, published in one ConfigMap. The
// document is deterministic (sorted, no timestamps), versioned by schema and by a hash of
// its content, and never carries credentials. Its types are its own (internal/policy
// converts the API's into them), and it knows nothing of the runtime
// (internal/limiterspec turns an Entry into what the limiter runs).
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// SchemaVersion is the version of this document's shape. A sidecar refuses a snapshot
// with another version and keeps its last good one.
const SchemaVersion = 1

const (
	// ConfigMapName is the name of the snapshot ConfigMap in each namespace with policies.
	ConfigMapName = "ratelimit-snapshot"
	// DataKey is the ConfigMap key holding the JSON document.
	DataKey = "snapshot.json"
	// LabelSnapshot marks snapshot ConfigMaps, so the controller watches only them.
	LabelSnapshot = "policy.ratelimit.dev/snapshot"
	// AnnotationVersion repeats the content version on the ConfigMap for humans and tools.
	AnnotationVersion = "policy.ratelimit.dev/snapshot-version"
	// MaxBytes is the most a snapshot may weigh: a ConfigMap holds at most 1 MiB, and the
	// object's metadata needs room too.
	MaxBytes = 1000 * 1024
)

// Snapshot is the document.
type Snapshot struct {
	// SchemaVersion is SchemaVersion when written.
	SchemaVersion int `json:"schemaVersion"`
	// Namespace the policies belong to.
	Namespace string `json:"namespace"`
	// Version is the content hash of Redis, Scripts and Policies (hex, 16 characters).
	Version string `json:"version"`
	// KeyPrefix is the installation's key prefix: every key of the namespace's policies
	// begins with "{<KeyPrefix><Namespace>/". Empty in documents written before it existed,
	// which means keylayout.DefaultPrefix.
	KeyPrefix string `json:"keyPrefix,omitempty"`
	// Redis says where the limiter state lives; never credentials.
	Redis Redis `json:"redis"`
	// Scripts are the Lua scripts the policies run, by name.
	Scripts []Script `json:"scripts"`
	// Policies are the namespace's valid policies, sorted by name.
	Policies []Entry `json:"policies"`
}

// Redis is the Redis topology, without credentials (sidecars mount their own Secret).
type Redis struct {
	// Mode is standalone, cluster or sentinel.
	Mode string `json:"mode"`
	// Addrs are the endpoints.
	Addrs []string `json:"addrs"`
	// MasterName is the Sentinel master name.
	MasterName string `json:"masterName,omitempty"`
	// DB is the logical database.
	DB int `json:"db,omitempty"`
	// TLS says Redis is reached over TLS; which CAs to trust is each sidecar's own setting.
	TLS bool `json:"tls,omitempty"`
	// Functions says the manager loads the scripts as Redis functions (FUNCTION LOAD) and
	// sidecars must call them with FCALL: set with per-namespace users, who may run no
	// EVAL or EVALSHA. A sidecar built before it existed refuses such a snapshot (its
	// content hash differs) and keeps its last good one.
	Functions bool `json:"functions,omitempty"`
}

// Script is one Lua script and its SHA1.
type Script struct {
	// Name of the script, e.g. "check_bucket" (internal/scripts/generated).
	Name string `json:"name"`
	// SHA is what EVALSHA takes.
	SHA string `json:"sha"`
}

// content is the hashed part of a snapshot.
type content struct {
	KeyPrefix string   `json:"keyPrefix,omitempty"`
	Redis     Redis    `json:"redis"`
	Scripts   []Script `json:"scripts"`
	Policies  []Entry  `json:"policies"`
}

// Seal fills in SchemaVersion and Version from the content.
func (s *Snapshot) Seal() error {
	b, err := json.Marshal(content{s.KeyPrefix, s.Redis, s.Scripts, s.Policies})
	if err != nil {
		return fmt.Errorf("hash snapshot: %w", err)
	}
	sum := sha256.Sum256(b)
	s.SchemaVersion, s.Version = SchemaVersion, hex.EncodeToString(sum[:8])
	return nil
}

// Marshal is the snapshot's canonical JSON: same content, same bytes.
func (s *Snapshot) Marshal() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return b, nil
}

// Parse decodes and checks a snapshot document: known schema version, a version matching
// the content, policy names unique. A document that fails is refused whole. Whether each
// policy compiles is its reader's to check, policy by policy (Entry.Compile), so that one
// policy no reader can run does not take the others down with it.
func Parse(data []byte) (*Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	if s.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("snapshot schema version %d, this build understands %d", s.SchemaVersion, SchemaVersion)
	}
	want := s
	if err := want.Seal(); err != nil {
		return nil, err
	}
	if want.Version != s.Version {
		return nil, fmt.Errorf("snapshot version %q does not match its content (%q): truncated or edited", s.Version, want.Version)
	}
	if s.KeyPrefix != "" {
		if err := keylayout.ValidatePrefix(s.KeyPrefix); err != nil {
			return nil, fmt.Errorf("snapshot keyPrefix: %w", err)
		}
	}
	seen := make(map[string]bool, len(s.Policies))
	for _, p := range s.Policies {
		if seen[p.Name] {
			return nil, fmt.Errorf("snapshot policy %q appears twice", p.Name)
		}
		seen[p.Name] = true
	}
	return &s, nil
}

// Prefix is the key prefix the document's keys must begin with, after the brace and
// before the namespace.
func (s *Snapshot) Prefix() string {
	if s.KeyPrefix == "" {
		return keylayout.DefaultPrefix
	}
	return s.KeyPrefix
}
