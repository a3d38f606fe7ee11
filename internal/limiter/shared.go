package limiter

import (
	"strconv"
)

// maxShared is the most checks one shared call carries (scripts.Checks refuses more).
const maxShared = 128

// share groups a pipeline's calls for a standalone or Sentinel Redis: the checks of one
// policy (one script and flavour) queued together go as one call of its shared script
// (scripts.Checks), up to maxShared each; every other call goes alone. One policy's only:
// Redis refuses a whole call for one key outside the caller's ACL, so a policy whose keys
// are refused must fail no other's checks. The script's own overhead (the call,
// the clock) is then paid once for the group: Redis spends less per decision, and each
// check is as exact as alone (one runs after another inside one script). Not on Redis
// Cluster: one call's keys must all live on one slot there.
func share(calls []*call) []*call {
	groups := map[*Policy][]*call{}
	out := make([]*call, 0, len(calls))
	for _, c := range calls {
		if c.script.shared == nil || c.policy == nil {
			out = append(out, c)
			continue
		}
		groups[c.policy] = append(groups[c.policy], c)
	}
	for _, group := range groups {
		s := group[0].script
		for len(group) > 0 {
			n := min(len(group), maxShared)
			if n == 1 {
				out = append(out, group[0])
			} else {
				out = append(out, sharedCall(s.shared, group[:n]))
			}
			group = group[n:]
		}
	}
	return out
}

// sharedCall is one call of the shared script s carrying members: every member's keys, one
// after another, and ARGV: their number, then per member the counts of its keys and of its
// arguments, then its arguments.
func sharedCall(s *Script, members []*call) *call {
	nk, na := 0, 1
	for _, m := range members {
		nk, na = nk+len(m.keys), na+2+len(m.args)
	}
	keys, args := make([]string, 0, nk), make([]any, 0, na)
	args = append(args, strconv.Itoa(len(members)))
	for _, m := range members {
		keys = append(keys, m.keys...)
		args = append(args, strconv.Itoa(len(m.keys)), strconv.Itoa(len(m.args)))
		args = append(args, m.args...)
	}
	return &call{script: s, keys: keys, args: args, members: members}
}

// answer finishes c with v and err: a shared call each of its members with its own reply
// (an error reply in its place is that member's error), or all of them with err.
func (c *call) answer(v any, err error) {
	if c.members == nil {
		c.finish(v, err)
		return
	}
	replies, ok := v.([]any)
	if err == nil && (!ok || len(replies) != len(c.members)) {
		err = errSharedReply
	}
	for i, m := range c.members {
		if err != nil {
			m.finish(nil, err)
			continue
		}
		if e, isErr := replies[i].(error); isErr {
			m.finish(nil, e)
			continue
		}
		m.finish(replies[i], nil)
	}
}
