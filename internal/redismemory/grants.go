package redismemory

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ACL rules the checks need, as config/redis/acl.conf's administrative user grants them.
const (
	// RuleConfigGet reads maxmemory, maxmemory-policy and maxmemory-clients.
	RuleConfigGet = "+config|get"
	// RuleInfo reads INFO memory, stats and replication.
	RuleInfo = "+info"
	// RuleScan walks the keys of a primary.
	RuleScan = "+scan"
	// RuleMemoryUsage sizes a key.
	RuleMemoryUsage = "+memory|usage"
	// RulePTTL reads a key's TTL.
	RulePTTL = "+pttl"
	// RuleClientList reads the tenant users' connections.
	RuleClientList = "+client|list"
	// RuleReadKeys lets MEMORY USAGE and PTTL name any key; none of the commands granted
	// returns a value.
	RuleReadKeys = "%R~*"
	// RuleClusterNodes lists every node of a Redis Cluster (redisacl.ClusterNodes).
	RuleClusterNodes = "+cluster|nodes"
)

// Rules are every ACL rule the checks use: the settings (RuleConfigGet, RuleInfo), the
// per-namespace sampling (RuleScan, RuleMemoryUsage, RulePTTL, RuleReadKeys) and, with
// tenant users, their connections (RuleClientList).
var Rules = []string{RuleConfigGet, RuleInfo, RuleScan, RuleMemoryUsage, RulePTTL, RuleClientList, RuleReadKeys}

// refusedCommand finds the command a NOPERM reply names: "... to run the 'config|get'
// command".
var refusedCommand = regexp.MustCompile(`run the '([a-z|-]+)' command`)

// refused returns the rule whose absence made Redis refuse a command, and whether err holds
// such a refusal (NOPERM): the command the reply names, else rule (the one granting the
// command sent); RuleReadKeys when a key was refused.
func refused(err error, rule string) (string, bool) {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), "NOPERM") {
		return "", false
	}
	if strings.Contains(rerr.Error(), "access one of the keys") {
		return RuleReadKeys, true
	}
	if m := refusedCommand.FindStringSubmatch(rerr.Error()); m != nil {
		return "+" + m[1], true
	}
	return rule, true
}

// missingRules merges rule lists into one, each rule once: those of Rules in its order,
// then any other.
func missingRules(lists ...[]string) []string {
	var out []string
	for _, r := range append(slices.Clone(Rules), slices.Concat(lists...)...) {
		if !slices.Contains(out, r) && slices.ContainsFunc(lists, func(l []string) bool { return slices.Contains(l, r) }) {
			out = append(out, r)
		}
	}
	return out
}
