package redistest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ACLUser makes one user line of an ACL conf fragment usable: its password placeholder
// replaced, its rules optionally edited.
type ACLUser struct {
	// Password replaces the line's placeholder rule ("#REPLACE-WITH-...").
	Password string
	// Edit, when set, changes the rules after the user name (placeholder already replaced).
	Edit func(rules []string) []string
}

// WithACLConf makes the server include a copy of the redis.conf fragment at path (for
// example config/redis/acl.conf) holding only the user lines named in users, each with its
// placeholder replaced by the SHA-256 of its password and its rules edited. It fails the
// test when a named user is missing or has no placeholder, so a test cannot silently run
// with a file that lost its user.
func WithACLConf(t testing.TB, path string, users map[string]ACLUser) Option {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("redistest: read %s: %v", path, err)
	}
	var out []string
	found := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" {
			continue
		}
		u, ok := users[f[1]]
		if !ok {
			continue
		}
		out = append(out, aclLine(t, path, f[1], f[2:], u))
		found[f[1]] = true
	}
	for name := range users {
		if !found[name] {
			t.Fatalf("redistest: %s declares no user %s", path, name)
		}
	}
	conf := filepath.Join(t.TempDir(), "acl.conf")
	if err := os.WriteFile(conf, []byte(strings.Join(out, "\n")+"\n"), 0o600); err != nil {
		t.Fatalf("redistest: write %s: %v", conf, err)
	}
	return WithArgs("--include", conf)
}

// ACLGrants are the +command rules ("+get", "+@read", ...) of user's line in the ACL conf
// fragment at path; it fails the test as WithACLConf does when the line is missing.
func ACLGrants(t testing.TB, path, user string) []string {
	t.Helper()
	var grants []string
	WithACLConf(t, path, map[string]ACLUser{user: {Edit: func(rules []string) []string {
		for _, r := range rules {
			if strings.HasPrefix(r, "+") {
				grants = append(grants, r)
			}
		}
		return rules
	}}})
	return grants
}

// ACLKeyRules are the key rules ("~*", "%R~*", ...) of user's line in the ACL conf
// fragment at path; it fails the test as WithACLConf does when the line is missing.
func ACLKeyRules(t testing.TB, path, user string) []string {
	t.Helper()
	var rules []string
	WithACLConf(t, path, map[string]ACLUser{user: {Edit: func(all []string) []string {
		for _, r := range all {
			if strings.HasPrefix(r, "~") || strings.HasPrefix(r, "%") {
				rules = append(rules, r)
			}
		}
		return all
	}}})
	return rules
}

// aclLine is one user line with its placeholder replaced and its rules edited.
func aclLine(t testing.TB, path, name string, rules []string, u ACLUser) string {
	t.Helper()
	i := slices.IndexFunc(rules, func(r string) bool { return strings.HasPrefix(r, "#REPLACE-WITH-") })
	if i < 0 {
		t.Fatalf("redistest: %s: user %s lost its password placeholder", path, name)
	}
	sum := sha256.Sum256([]byte(u.Password))
	rules = slices.Clone(rules)
	rules[i] = "#" + hex.EncodeToString(sum[:])
	if u.Edit != nil {
		rules = u.Edit(rules)
	}
	return strings.Join(append([]string{"user", name}, rules...), " ")
}

// PasswordHashes are the password hashes (SHA-256, hex) s holds for user, sorted, read as
// the default user: nil when s has no such user, empty when it has one without a password.
func (s *Server) PasswordHashes(ctx context.Context, t testing.TB, user string) []string {
	t.Helper()
	v, err := s.Client().Do(ctx, "ACL", "GETUSER", user).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		t.Fatalf("redistest: %s ACL GETUSER %s: %v", s.Addr(), user, err)
	}
	m, ok := v.(map[any]any)
	if !ok {
		t.Fatalf("redistest: %s ACL GETUSER %s: reply %T", s.Addr(), user, v)
	}
	list, _ := m["passwords"].([]any)
	out := []string{}
	for _, h := range list {
		out = append(out, fmt.Sprint(h))
	}
	slices.Sort(out)
	return out
}

// ACLRefusals are the servers' ACL LOG entries, read as the default user, as
// "<reason>:<object>": only those of user, or of every user when user is "".
func ACLRefusals(ctx context.Context, t testing.TB, user string, servers ...*Server) []string {
	t.Helper()
	var out []string
	for _, s := range servers {
		entries, err := s.Client().ACLLog(ctx, 1000).Result()
		if err != nil {
			t.Fatalf("redistest: %s ACL LOG: %v", s.Addr(), err)
		}
		for _, e := range entries {
			if user == "" || e.Username == user {
				out = append(out, e.Reason+":"+e.Object)
			}
		}
	}
	return out
}

// FlushScripts returns a function that empties the servers' script caches, as the default
// user (SCRIPT FLUSH), as a test does to make the limiter fall back to EVAL.
func FlushScripts(servers ...*Server) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, s := range servers {
			if err := s.Client().ScriptFlush(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", s.Addr(), err)
			}
		}
		return nil
	}
}

// LimiterMemory are the redis-server arguments docs/operations.md ("Redis memory") asks of a
// Redis shared by tenants, with maxmemory at maxMemory and maxmemory-clients at clients:
// noeviction, a hard limit on replies, values of at most 1 MiB. Arguments after them
// override them (a test trying another policy appends --maxmemory-policy).
func LimiterMemory(maxMemory, clients string) []string {
	return []string{"--maxmemory", maxMemory, "--maxmemory-policy", "noeviction", "--maxmemory-clients", clients,
		"--client-output-buffer-limit", "normal 32mb 8mb 60", "--proto-max-bulk-len", "1mb"}
}

// FlushFunctions returns a function that empties the servers' script caches and function
// libraries, as the default user (SCRIPT FLUSH, FUNCTION FLUSH), as a test does to make
// the manager load them again.
func FlushFunctions(servers ...*Server) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := FlushScripts(servers...)(ctx); err != nil {
			return err
		}
		for _, s := range servers {
			if err := s.Client().FunctionFlush(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", s.Addr(), err)
			}
		}
		return nil
	}
}

// SecretDir writes files (name to content) into a fresh directory of the test, as the
// kubelet mounts a Secret's data, and returns the directory.
func SecretDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatalf("redistest: write %s: %v", name, err)
		}
	}
	return dir
}

// CredentialsDir is the mount of a kubernetes.io/basic-auth Secret for a Redis user: its
// username and password files, what --redis-credentials-path reads.
func CredentialsDir(t testing.TB, user, password string) string {
	t.Helper()
	return SecretDir(t, map[string]string{"username": user, "password": password})
}
