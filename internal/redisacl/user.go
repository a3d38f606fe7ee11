// Package redisacl manages Redis ACL users on every node of one Redis deployment: the
// standalone server, every node of a Cluster (replicas included), or a Sentinel-managed
// primary and its replicas. ACLs are per node and never replicated, so a user exists only
// where it was set; Users keeps the wanted users, applies them to every node, deletes them
// from every node, and repairs nodes that lost them (a restart without an aclfile).
//
// Passwords never reach Redis in clear: a user is set with the SHA-256 of each password it
// accepts (ACL SETUSER #<hex>), so neither the wire, a MONITOR, nor ACL LIST shows one.
// The package has no Kubernetes imports.
package redisacl

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// DefaultKeyPrefix is the operator's default key prefix: keys look like
// "{rl:<namespace>/<policy>:<identity>}:<limit>".
const DefaultKeyPrefix = keylayout.DefaultPrefix

// PasswordBytes is the entropy of a generated password: 32 random bytes (256 bits).
const PasswordBytes = 32

// User is one ACL user as the operator wants it on every node: enabled, accepting exactly
// the passwords whose hashes are listed, on the listed key patterns, with only the listed
// commands, and no Pub/Sub channels.
type User struct {
	// Name is the ACL user name.
	Name string
	// PasswordHashes are the SHA-256 (lowercase hex) of every password the user accepts:
	// one, or two while a rotation's previous password is still honoured.
	PasswordHashes []string
	// KeyPatterns are the glob patterns of the keys the user may touch, without "~".
	KeyPatterns []string
	// Commands are the commands (and command|subcommand) the user may run, without "+".
	Commands []string
}

// tenantCommands are what a sidecar with a per-namespace user sends, and what the limiter's
// functions call from Lua (Redis checks commands a function runs against the caller's ACL
// too): PING (the circuit breaker's probe), FCALL (every check and lease: the functions the
// manager loaded), FCALL_RO (peeks: the no-writes functions), GETRANGE and SET (the functions.
// reads and writes), TIME (their clock), ROLE
// and WAIT (a lease call learns its primary's replicas and waits until they hold the lease
// before spending it). No EVAL, EVALSHA, SCRIPT or FUNCTION LOAD: such a user runs no code
// of its choosing, only the functions the manager loaded.
var tenantCommands = []string{"ping", "fcall", "fcall_ro", "getrange", "set", "time", "role", "wait"}

// clusterCommands are what go-redis's Cluster client needs besides: CLUSTER SLOTS for the slot
// map, COMMAND to route commands by key.
var clusterCommands = []string{"cluster|slots", "command"}

// TenantCommands are the commands a namespace's user needs: on Cluster also CLUSTER SLOTS and
// COMMAND, SELECT when the logical database is not 0 (go-redis selects it on every
// connection), and EVALSHA (never EVAL) only with allowEvalSHA, while sidecars of a version
// before functions still run (they find the scripts the manager preloads).
func TenantCommands(cluster bool, db int, allowEvalSHA bool) []string {
	out := append([]string(nil), tenantCommands...)
	if cluster {
		out = append(out, clusterCommands...)
	}
	if db != 0 {
		out = append(out, "select")
	}
	if allowEvalSHA {
		out = append(out, "evalsha")
	}
	return out
}

// TenantUser is namespace ns's user as tenancy mode makes it: named userPrefix + ns, its keys
// those of ns under keyPrefix (KeyPattern), running commands, accepting the password hashes.
func TenantUser(userPrefix, keyPrefix, ns string, commands, hashes []string) (User, error) {
	pattern, err := KeyPattern(keyPrefix, ns)
	if err != nil {
		return User{}, err
	}
	return User{Name: userPrefix + ns, PasswordHashes: hashes, KeyPatterns: []string{pattern}, Commands: commands}, nil
}

// KeyPattern is the pattern of every key of one namespace: "{" + keyPrefix + namespace + "/*".
// The key-scope rule makes every key template of a policy begin with that text, so the
// pattern admits the namespace's keys and nothing else (not even "{rl:shopping/..." for
// namespace "shop"). An empty keyPrefix means DefaultKeyPrefix.
func KeyPattern(keyPrefix, namespace string) (string, error) {
	if keyPrefix == "" {
		keyPrefix = DefaultKeyPrefix
	}
	if err := keylayout.ValidatePrefix(keyPrefix); err != nil {
		return "", err
	}
	if namespace == "" {
		return "", errors.New("namespace is empty")
	}
	if err := checkPatternText(namespace); err != nil {
		return "", fmt.Errorf("namespace %q: %w", namespace, err)
	}
	// The scope every key of the namespace begins with (keylayout.InScope holds every
	// template to it), so this pattern grants exactly the namespace's keys.
	return keylayout.ScopeOf(keyPrefix, namespace) + "*", nil
}

// checkPatternText refuses what a glob or an ACL rule would read as more than literal text.
func checkPatternText(s string) error {
	if i := strings.IndexAny(s, "*?[]\\{}/ \t\r\n\x00"); i >= 0 {
		return fmt.Errorf("holds %q, which is not literal in a key pattern", s[i])
	}
	return nil
}

// NewPassword returns a password of PasswordBytes random bytes from crypto/rand, in unpadded
// base64url (43 characters), safe in a file, a header and a Redis AUTH.
func NewPassword() (string, error) {
	b := make([]byte, PasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// HashPassword is the SHA-256 of password in lowercase hex: the form ACL SETUSER #<hash>
// takes and ACL LIST shows.
func HashPassword(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// Validate reports the first field Redis would refuse or read differently.
func (u User) Validate() error {
	if u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n\x00") {
		return fmt.Errorf("user name %q: empty or holds whitespace", u.Name)
	}
	if len(u.PasswordHashes) == 0 {
		return fmt.Errorf("user %s: no password", u.Name)
	}
	for _, h := range u.PasswordHashes {
		if !isHash(h) {
			return fmt.Errorf("user %s: a password hash is not 64 lowercase hex digits", u.Name)
		}
	}
	if len(u.KeyPatterns) == 0 || len(u.Commands) == 0 {
		return fmt.Errorf("user %s: no key pattern or no command", u.Name)
	}
	for _, s := range append(append([]string(nil), u.KeyPatterns...), u.Commands...) {
		if s == "" || strings.ContainsAny(s, " \t\r\n\x00") {
			return fmt.Errorf("user %s: rule %q is empty or holds whitespace", u.Name, s)
		}
	}
	return nil
}

func isHash(h string) bool {
	if len(h) != sha256.Size*2 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// rules are the ACL SETUSER arguments after the name. reset first makes the command replace
// the whole user at once (Redis applies one SETUSER atomically): no password, key, channel
// or command survives from before. resetchannels again, because reset grants every channel
// when acl-pubsub-default is allchannels.
func (u User) rules() []any {
	out := []any{"reset", "resetchannels", "on"}
	for _, h := range u.PasswordHashes {
		out = append(out, "#"+h)
	}
	for _, k := range u.KeyPatterns {
		out = append(out, "~"+k)
	}
	for _, c := range u.Commands {
		out = append(out, "+"+c)
	}
	return out
}
