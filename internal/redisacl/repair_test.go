package redisacl_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// startRepair starts a server with users a and b set through the administrative user.
func startRepair(t *testing.T) (*redistest.Server, *redisacl.Users, map[string]string) {
	t.Helper()
	srv, u := standaloneAdmin(t)
	return srv, u, tenants(testCtx(t), t, u, "a", "b")
}

// TestRepairAlteredAndUnknown: Repair sets back a user altered by hand, reports a managed
// user nobody wants without deleting it, and never touches a user outside the prefix;
// repairing a node that holds everything as wanted writes nothing.
func TestRepairAlteredAndUnknown(t *testing.T) {
	t.Parallel()
	srv, u, pass := startRepair(t)
	ctx := testCtx(t)
	others := []string{"someone-else", "ratelimit-nsx", prefix + "ghost", adminUser, "default"}
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", prefix + "a", "~*", "+flushall"},               // widened by hand
		{"ACL", "SETUSER", prefix + "ghost", "on", ">x", "~*", "+@all"},   // nobody's
		{"ACL", "SETUSER", "someone-else", "on", ">y", "~app:*", "+get"},  // not managed
		{"ACL", "SETUSER", "ratelimit-nsx", "on", ">z", "~app:*", "+get"}, // not the prefix
	} {
		if err := srv.Client().Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := aclList(t, srv)
	res, err := u.Repair(ctx)
	if err != nil || res.Applied != 1 || !slices.Equal(res.Unknown, []string{prefix + "ghost"}) {
		t.Fatalf("Repair: %+v, %v; want a set again, ghost unknown", res, err)
	}
	after := aclList(t, srv)
	checkUntouched(t, before, after, others)
	a := tenant(t, "a", false, pass["a"])
	if got := holders(ctx, t, []*redistest.Server{srv}, a); len(got) != 1 || strings.Contains(after[a.Name], "flushall") {
		t.Fatalf("user a after Repair: %s", after[a.Name])
	}
	if res, err := u.Repair(ctx); err != nil || res.Applied != 0 {
		t.Fatalf("second Repair: %+v, %v; want nothing to set", res, err)
	}
}

// TestRepairAfterRestart: a server restarted without an aclfile has lost the users; Repair
// sets every wanted user back with its current password, and each namespace's checks pass.
func TestRepairAfterRestart(t *testing.T) {
	t.Parallel()
	srv, u, pass := startRepair(t)
	ctx := testCtx(t)
	srv.Restart(t)
	if got := aclList(t, srv); got[prefix+"a"] != "" || got[prefix+"b"] != "" {
		t.Fatalf("users survived a restart without an aclfile: the test proves nothing: %v", got)
	}
	if res, err := u.Repair(ctx); err != nil || res.Applied != 2 || len(res.Unknown) != 0 {
		t.Fatalf("Repair after the restart: %+v, %v; want a and b set again", res, err)
	}
	for ns, p := range pass {
		if errs := checkAll(ctx, client(t, redisconn.ModeStandalone, []string{srv.Addr()}, prefix+ns, p), ns, srv.Client()); len(errs) > 0 {
			t.Errorf("%s after the repair: %v", ns, errs)
		}
	}
}

// checkUntouched fails for each named user whose ACL LIST line changed.
func checkUntouched(t *testing.T, before, after map[string]string, names []string) {
	t.Helper()
	for _, name := range names {
		if before[name] == "" || before[name] != after[name] {
			t.Errorf("user %s changed (or missing):\n%s\n%s", name, before[name], after[name])
		}
	}
}

// TestUsersOwnOnlyTheirPrefix: Ensure and Delete refuse a user outside the prefix.
func TestUsersOwnOnlyTheirPrefix(t *testing.T) {
	u := &redisacl.Users{Prefix: prefix}
	ctx := testCtx(t)
	for _, name := range []string{"default", adminUser, prefix, "ratelimit-nsx"} {
		user := redisacl.User{Name: name, PasswordHashes: []string{redisacl.HashPassword("p")}, KeyPatterns: []string{"x"},
			Commands: []string{"ping"}}
		if err := u.Ensure(ctx, user); err == nil || !strings.Contains(err.Error(), "not managed") {
			t.Errorf("Ensure %s: %v; want refused", name, err)
		}
		if err := u.Delete(ctx, name); err == nil || !strings.Contains(err.Error(), "not managed") {
			t.Errorf("Delete %s: %v; want refused", name, err)
		}
	}
}

// aclList is ACL LIST of the node by user name, read as the default user.
func aclList(t *testing.T, n *redistest.Server) map[string]string {
	t.Helper()
	lines, err := n.Client().Do(testCtx(t), "ACL", "LIST").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 {
			out[f[1]] = l
		}
	}
	return out
}
