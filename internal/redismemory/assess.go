package redismemory

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// State is what an Assessment says of the counters.
type State int

const (
	// Unknown means not checked yet, or some node could not be checked and none shows a
	// finding.
	Unknown State = iota
	// Protected means every node keeps counters and bounds memory, and the namespace's
	// scope holds no foreign keys.
	Protected
	// Exposed means some finding applies.
	Exposed
)

// Reasons of an Assessment besides the findings.
const (
	// ReasonProtected is the reason of a Protected assessment.
	ReasonProtected = "CountersProtected"
	// ReasonNotChecked: no round has read the settings yet.
	ReasonNotChecked = "NotChecked"
	// ReasonMissingGrants: the manager's Redis user may not read the settings.
	ReasonMissingGrants = "MissingGrants"
	// ReasonRedisUnavailable: some node did not answer.
	ReasonRedisUnavailable = "RedisUnavailable"
)

// Assessment is what a report says of one namespace's counters: a policy's condition.
type Assessment struct {
	// State is the verdict.
	State State
	// Reason is a finding (the worst that applies) or one of the Reason constants.
	Reason string
	// Message says which nodes and settings, and what to do. It holds no figure that
	// changes from round to round, so a condition carrying it changes only with the facts.
	Message string
}

// Report is what the monitor found: every node's settings from the last check, and each
// namespace's keys summed over the last completed SCAN cycle of every primary.
type Report struct {
	// Checked is when the settings were last read; zero before.
	Checked time.Time
	// Err is the last check's failure to list the nodes, if any.
	Err error
	// Nodes are the nodes the last check reached, by address.
	Nodes []Node
	// Namespaces is the usage by namespace (and OtherNamespace).
	Namespaces map[string]Usage
	// Cycles counts the SCAN cycles each primary has completed.
	Cycles map[string]int64
	// Sampling is true when per-namespace sampling is on.
	Sampling bool
}

// Assess says whether ns's counters are protected: Exposed with the worst finding of any
// node, or ForeignKeys for ns; else Unknown when some node could not be checked; else
// Protected. ns "" leaves out the namespace's own finding.
func (r *Report) Assess(ns string) Assessment {
	if r == nil || r.Checked.IsZero() {
		return Assessment{State: Unknown, Reason: ReasonNotChecked, Message: "Redis's memory settings have not been read yet"}
	}
	var reason string
	var parts []string
	for _, f := range NodeFindings {
		if p := r.describe(f); p != "" {
			reason, parts = cmp.Or(reason, string(f)), append(parts, p)
		}
	}
	if ns != "" && ns != OtherNamespace && r.Namespaces[ns].ForeignKeys > 0 {
		reason, parts = cmp.Or(reason, string(ForeignKeys)), append(parts, foreignMessage(ns))
	}
	unknownReason, unknown := r.unknown()
	switch {
	case reason != "":
		return Assessment{State: Exposed, Reason: reason, Message: strings.Join(append(parts, unknown...), "; ")}
	case unknownReason != "":
		return Assessment{State: Unknown, Reason: unknownReason, Message: strings.Join(unknown, "; ")}
	}
	msg := fmt.Sprintf("every Redis node (%d) bounds memory (maxmemory, maxmemory-clients, client-output-buffer-limit, "+
		"proto-max-bulk-len) and keeps counters "+
		"(maxmemory-policy noeviction): a full Redis answers with OOM and the policy's failure mode decides", len(r.Nodes))
	return Assessment{State: Protected, Reason: ReasonProtected, Message: msg + r.samplingNote()}
}

// describe is the message part of finding f: which nodes, which setting, and what it
// means; "" when no node has it.
func (r *Report) describe(f Finding) string {
	groups := map[string][]string{} // setting -> nodes
	for _, n := range r.Nodes {
		if n.Err == nil && slices.Contains(n.Findings(), f) {
			groups[setting(f, n.Settings)] = append(groups[setting(f, n.Settings)], n.Addr)
		}
	}
	if len(groups) == 0 {
		return ""
	}
	var on []string
	for _, s := range sortedKeys(groups) {
		on = append(on, s+" on "+join(groups[s]))
	}
	switch f {
	case CountersEvictable:
		return "counters can be evicted: " + strings.Join(on, ", ") + " (every limiter key has a TTL, so any policy but " +
			"noeviction evicts counters, and an evicted counter admits its identity again); set maxmemory-policy noeviction"
	case MemoryUnbounded:
		return "memory is unbounded: " + strings.Join(on, ", ") + " (Redis grows until it is killed); set maxmemory"
	case RepliesUnbounded:
		return "replies are unbounded: " + strings.Join(on, ", ") + " (one short command, an MGET naming a large key " +
			"many times, builds a reply of any size while every tenant waits); set client-output-buffer-limit normal"
	case ValuesUnbounded:
		return "values are unbounded: " + strings.Join(on, ", ") + " (a namespace's user may store values that large, " +
			"and every call of the limiter's functions on one copies it); set proto-max-bulk-len 1mb"
	default:
		return "client memory is unbounded: " + strings.Join(on, ", ") + " (a client's buffers, such as a huge MGET's " +
			"arguments, are never evicted); set maxmemory-clients"
	}
}

// setting is the setting behind finding f on a node, as the message names it.
func setting(f Finding, s Settings) string {
	switch {
	case f == CountersEvictable:
		return "maxmemory-policy " + s.Policy
	case f == MemoryUnbounded:
		return "maxmemory 0"
	case f == RepliesUnbounded:
		return "client-output-buffer-limit normal 0"
	case f == ValuesUnbounded:
		return "proto-max-bulk-len " + strconv.FormatInt(s.MaxBulk, 10)
	case s.MaxMemoryClients == "":
		return "no maxmemory-clients (Redis before 7.0)"
	case strings.HasSuffix(s.MaxMemoryClients, "%") && s.MaxMemory <= 0:
		return "maxmemory-clients " + s.MaxMemoryClients + " of maxmemory 0"
	default:
		return "maxmemory-clients " + s.MaxMemoryClients
	}
}

// foreignMessage is the ForeignKeys part for namespace ns.
func foreignMessage(ns string) string {
	return "keys without a TTL in namespace " + ns + "'s scope: the limiter writes every key with one, so they were " +
		"written with the namespace's Redis credentials (ratelimit_redis_namespace_foreign_memory_bytes{tenant_namespace=" +
		strconv.Quote(ns) + "} has their size)"
}

// unknown is why some nodes could not be checked: the reason (MissingGrants before
// RedisUnavailable) and the message parts; "" when every node was.
func (r *Report) unknown() (string, []string) {
	var reason string
	var parts []string
	missing := map[string][]string{} // rules -> nodes
	for _, n := range r.Nodes {
		switch {
		case n.Err != nil && len(n.Missing) > 0:
			rules := strings.Join(n.Missing, " ")
			missing[rules] = append(missing[rules], n.Addr)
		case n.Err != nil:
			reason = ReasonRedisUnavailable
			parts = append(parts, "could not read the memory settings of "+n.Addr+": "+n.Err.Error())
		}
	}
	listRule, listRefused := refused(r.Err, RuleClusterNodes)
	switch {
	case listRefused:
		missing[listRule] = append(missing[listRule], "the Cluster (listing its nodes)")
	case r.Err != nil:
		reason = ReasonRedisUnavailable
		parts = append(parts, "could not list the Redis nodes: "+r.Err.Error())
	case len(r.Nodes) == 0 && len(missing) == 0:
		reason = ReasonRedisUnavailable
		parts = append(parts, "no Redis node was found")
	}
	for _, rules := range sortedKeys(missing) {
		reason = ReasonMissingGrants
		parts = append([]string{"the manager's Redis user lacks " + rules + " on " + join(missing[rules]) +
			": grant the rules of config/redis/acl.conf's ratelimit-admin (" + strings.Join(Rules, " ") + ")"}, parts...)
	}
	return reason, parts
}

// samplingNote says which nodes cannot be sampled for lack of grants; "" when all can.
func (r *Report) samplingNote() string {
	lack := map[string][]string{}
	for _, n := range r.Nodes {
		if n.Err == nil && len(n.Missing) > 0 {
			rules := strings.Join(n.Missing, " ")
			lack[rules] = append(lack[rules], n.Addr)
		}
	}
	var out string
	for _, rules := range sortedKeys(lack) {
		out += "; per-namespace memory is not sampled on " + join(lack[rules]) + ": the manager's Redis user lacks " + rules
	}
	return out
}

// digest identifies every namespace's assessment: the report's own and the namespaces with
// foreign keys.
func (r *Report) digest() string {
	a := r.Assess("")
	var foreign []string
	for ns, u := range r.Namespaces {
		if u.ForeignKeys > 0 && ns != OtherNamespace {
			foreign = append(foreign, ns)
		}
	}
	slices.Sort(foreign)
	return fmt.Sprintf("%s: %s [foreign keys: %s]", a.Reason, a.Message, strings.Join(foreign, ","))
}

func itoa(n int) string { return strconv.Itoa(n) }
