package redisacl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout bounds one operation on every node.
const DefaultTimeout = 5 * time.Second

// Users keeps the wanted users on every node of one deployment. It owns the users whose
// names begin with Prefix and never touches any other user.
//
// Ensure, Delete and Repair run one at a time, each to its end on every node: a repair can
// never write back a user that a concurrent Ensure has just replaced (a rotation's new
// password would be lost on that node). The wanted set lives in memory only; whoever calls
// Ensure must derive it from durable state, and Repair reports the managed users a node
// holds that nobody asked for, so that state can be consulted.
type Users struct {
	// Nodes are the deployment's nodes.
	Nodes Nodes
	// Prefix begins every managed user name; required.
	Prefix string
	// Timeout bounds one Ensure, Delete or Repair. Default DefaultTimeout.
	Timeout time.Duration

	mu      sync.Mutex
	wanted  map[string]User
	applied map[string]bool // set on every node by the last Ensure
}

// RepairResult is what one Repair round found.
type RepairResult struct {
	// Applied counts users set again on a node that lacked them or held them otherwise
	// (one per user and node).
	Applied int
	// Unknown are managed users found on some node that are not wanted, sorted.
	Unknown []string
}

// Ensure makes user wanted and sets it on every node (ACL SETUSER, replacing it whole).
// It returns nil only once every node holds it; a node that failed is set again by the next
// Repair. Ensuring a user already set, unchanged, on every node does nothing.
func (u *Users) Ensure(ctx context.Context, user User) error {
	if err := u.own(user.Name); err != nil {
		return err
	}
	if err := user.Validate(); err != nil {
		return err
	}
	user = canonical(user)
	u.mu.Lock()
	defer u.mu.Unlock()
	if old, ok := u.wanted[user.Name]; ok && u.applied[user.Name] && equalUsers(old, user) {
		return nil
	}
	u.want(user)
	ctx, cancel := context.WithTimeout(ctx, u.timeout())
	defer cancel()
	err := u.Nodes.ForEach(ctx, func(ctx context.Context, node *redis.Client) error {
		return setUser(ctx, node, user)
	})
	u.applied[user.Name] = err == nil
	if err != nil {
		return fmt.Errorf("set redis user %s: %w", user.Name, err)
	}
	return nil
}

// Delete makes the user unwanted and deletes it from every node (ACL DELUSER, which also
// closes its connections). A node that failed keeps it; Repair then reports it as Unknown.
func (u *Users) Delete(ctx context.Context, name string) error {
	if err := u.own(name); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.wanted, name)
	delete(u.applied, name)
	ctx, cancel := context.WithTimeout(ctx, u.timeout())
	defer cancel()
	err := u.Nodes.ForEach(ctx, func(ctx context.Context, node *redis.Client) error {
		if err := node.Do(ctx, "ACL", "DELUSER", name).Err(); err != nil {
			return fmt.Errorf("ACL DELUSER: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete redis user %s: %w", name, err)
	}
	return nil
}

// Wanted returns the number of wanted users.
func (u *Users) Wanted() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.wanted)
}

// Repair reads every node's users (ACL LIST) and sets again each wanted user a node lacks
// or holds otherwise: a node restarted without an aclfile comes back with none. It deletes
// nothing: managed users nobody wants are returned as Unknown.
func (u *Users) Repair(ctx context.Context) (RepairResult, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, u.timeout())
	defer cancel()
	var mu sync.Mutex
	var res RepairResult
	unknown := map[string]bool{}
	err := u.Nodes.ForEach(ctx, func(ctx context.Context, node *redis.Client) error {
		applied, extra, err := u.repairNode(ctx, node)
		mu.Lock()
		defer mu.Unlock()
		res.Applied += applied
		for _, name := range extra {
			unknown[name] = true
		}
		return err
	})
	for name := range unknown {
		res.Unknown = append(res.Unknown, name)
	}
	slices.Sort(res.Unknown)
	if err != nil {
		return res, fmt.Errorf("repair redis users: %w", err)
	}
	return res, nil
}

// repairNode sets on one node the wanted users it does not hold as wanted, and returns how
// many, with the managed users it holds that are not wanted.
func (u *Users) repairNode(ctx context.Context, node *redis.Client) (int, []string, error) {
	lines, err := node.Do(ctx, "ACL", "LIST").StringSlice()
	if err != nil {
		return 0, nil, fmt.Errorf("ACL LIST: %w", err)
	}
	have := parseACLList(lines)
	var stale []User
	for name, want := range u.wanted {
		if o, ok := have[name]; !ok || !o.matches(want) {
			stale = append(stale, want)
		}
	}
	var unknown []string
	for name := range have {
		if _, ok := u.wanted[name]; !ok && strings.HasPrefix(name, u.Prefix) {
			unknown = append(unknown, name)
		}
	}
	if len(stale) == 0 {
		return 0, unknown, nil
	}
	_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, user := range stale {
			p.Do(ctx, append([]any{"ACL", "SETUSER", user.Name}, user.rules()...)...)
		}
		return nil
	})
	if err != nil {
		return 0, unknown, fmt.Errorf("ACL SETUSER: %w", err)
	}
	return len(stale), unknown, nil
}

// setUser replaces the user on one node.
func setUser(ctx context.Context, node *redis.Client, user User) error {
	if err := node.Do(ctx, append([]any{"ACL", "SETUSER", user.Name}, user.rules()...)...).Err(); err != nil {
		return fmt.Errorf("ACL SETUSER: %w", err)
	}
	return nil
}

// want records user as wanted; u.mu is held.
func (u *Users) want(user User) {
	if u.wanted == nil {
		u.wanted, u.applied = map[string]User{}, map[string]bool{}
	}
	u.wanted[user.Name] = user
}

// own refuses names outside the managed prefix: Users never touches another user.
func (u *Users) own(name string) error {
	if u.Prefix == "" {
		return errors.New("redisacl: Users.Prefix is empty")
	}
	if !strings.HasPrefix(name, u.Prefix) || name == u.Prefix {
		return fmt.Errorf("redis user %q is not managed (managed users begin with %q)", name, u.Prefix)
	}
	return nil
}

func (u *Users) timeout() time.Duration {
	if u.Timeout <= 0 {
		return DefaultTimeout
	}
	return u.Timeout
}

// canonical is user with its lists copied and sorted, so equal users compare equal.
func canonical(user User) User {
	for _, l := range []*[]string{&user.PasswordHashes, &user.KeyPatterns, &user.Commands} {
		*l = slices.Compact(slices.Sorted(slices.Values(*l)))
	}
	return user
}

func equalUsers(a, b User) bool {
	return a.Name == b.Name && slices.Equal(a.PasswordHashes, b.PasswordHashes) &&
		slices.Equal(a.KeyPatterns, b.KeyPatterns) && slices.Equal(a.Commands, b.Commands)
}
