package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// Bounds of --n (callers shown) and --max (callers read per request), and the server's
// default --n, as the usage server has them.
const (
	maxTopN     = 100
	maxTopMax   = 100_000
	defaultTopN = 10
)

// topOptions are the flags and arguments of "kubectl ratelimit top".
type topOptions struct {
	conn   *connectionOptions
	n      int
	max    int
	tier   string
	output string
	// all is --all: follow the server's continuations until the whole keyspace was read.
	all bool
	// nSet and maxSet say whether --n and --max were given: only those are sent.
	nSet, maxSet bool
	// policy is the argument.
	policy string
}

// newTopCommand is "kubectl ratelimit top".
func newTopCommand(conn *connectionOptions) *cobra.Command {
	o := &topOptions{conn: conn}
	cmd := &cobra.Command{
		Use:   "top POLICY",
		Short: "Show the callers of a policy under the most pressure now, and how many are denied",
		Long: `Show the callers of a RateLimitPolicy that have used the highest share of a limit, highest
first, and how many of its callers a request of cost 1 would be denied for now. Nothing is
debited. Callers are named by the hash of their identity, as events, metrics and overrides
name them; their identities are never shown.

Each caller is read against its own tier, or every caller against --tier. The usage server
finds callers by scanning Redis's keys, every tenant's, and each request does a bounded part
of that work (about 24,000 keys examined, fewer when it finds many callers): when Redis holds
more, the answer is partial and says how much of the keyspace it covered. --all follows the
server's continuations until every key was examined, adding the parts up and waiting as the
server asks (it serves about one overview a second per user). Each request reads at most
--max callers (default 10000) and the table shows --n of them (default 10). You need the
verb get on ratelimitpolicies/usage in the namespace.`,
		Example: `  kubectl ratelimit top -n shop orders
  kubectl ratelimit top -n shop orders --all
  kubectl ratelimit top -n shop orders --n 25 --tier gold --all -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.nSet = cmd.Flags().Changed("n")
			o.maxSet = cmd.Flags().Changed("max")
			o.policy = args[0]
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.n, "n", 0, fmt.Sprintf("how many callers `N` to show, 1 to %d (default: the server's, 10)", maxTopN))
	f.IntVar(&o.max, "max", 0,
		fmt.Sprintf("how many callers `M` to read at most per request, 1 to %d (default: the server's, 10000)", maxTopMax))
	f.StringVar(&o.tier, "tier", "", "the `TIER` to read every caller against (default: each caller's own)")
	f.BoolVar(&o.all, "all", false, "follow the server's continuations until every key was examined (paced by its Retry-After)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// run asks the usage server (every part of the keyspace with --all) and prints its answer.
func (o *topOptions) run(ctx context.Context, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	ns, client, err := o.conn.connect()
	if err != nil {
		return err
	}
	path := escapedPath("namespaces", ns, "ratelimitpolicies", o.policy, "usage", "top")
	var body []byte
	if o.all {
		body, err = o.readAll(ctx, client, path)
	} else {
		body, err = client.get(ctx, path, o.query(), http.StatusOK)
	}
	if err != nil {
		return err
	}
	return printAnswer(out, o.output, body, func(a *usage.Top) error {
		if a.Policy == "" {
			a.Policy = o.policy
		}
		return writeTopTable(out, a)
	})
}

// validate checks the arguments before anything is sent.
func (o *topOptions) validate() error {
	switch {
	case o.policy == "":
		return errors.New("POLICY is empty")
	case o.nSet && (o.n < 1 || o.n > maxTopN):
		return fmt.Errorf("--n %d: want a whole number from 1 to %d", o.n, maxTopN)
	case o.maxSet && (o.max < 1 || o.max > maxTopMax):
		return fmt.Errorf("--max %d: want a whole number from 1 to %d", o.max, maxTopMax)
	}
	return checkOutput(o.output)
}

// query holds the parameters given, and only those: n, max, tier.
func (o *topOptions) query() url.Values {
	q := url.Values{}
	if o.nSet {
		q.Set("n", strconv.Itoa(o.n))
	}
	if o.maxSet {
		q.Set("max", strconv.Itoa(o.max))
	}
	if o.tier != "" {
		q.Set("tier", o.tier)
	}
	return q
}

// writeTopTable prints the overview, notes on the callers not read, then one row per limit
// of each caller shown, the caller's columns on its first row only:
//
//	POLICY   CALLERS   DENIED      TIER
//	orders   42        7 (16.7%)   (each caller's own)
//
//	CALLER             TIER      DECISION   LIMIT        USED   QUOTA   FULL AGAIN IN
//	2bd806c97f0e00af   default   denied     per-minute   5      5       58.5s
func writeTopTable(w io.Writer, a *usage.Top) error {
	rows := [][]string{
		{"POLICY", "CALLERS", "DENIED", "TIER"},
		{printable(a.Policy), strconv.Itoa(a.Callers), deniedLabel(a), topTierLabel(a.Tier)},
	}
	rows = append(rows, topNotes(a)...)
	if len(a.Top) == 0 {
		rows = append(rows, nil, []string{"no caller holds counters of " + printable(a.Policy) + " now"})
		return writeRows(w, rows)
	}
	rows = append(rows, nil, []string{"CALLER", "TIER", "DECISION", "LIMIT", "USED", "QUOTA", "FULL AGAIN IN"})
	for i := range a.Top {
		rows = append(rows, callerRows(&a.Top[i])...)
	}
	return writeRows(w, rows)
}

// deniedLabel is how many callers are denied, with their share: "7 (16.7%)".
func deniedLabel(a *usage.Top) string {
	if a.Callers == 0 {
		return strconv.Itoa(a.Denied)
	}
	return fmt.Sprintf("%d (%.1f%%)", a.Denied, a.DeniedShare*100)
}

// topTierLabel is the tier every caller was read against, or "(each caller's own)".
func topTierLabel(tier string) string {
	if tier == "" {
		return "(each caller's own)"
	}
	return printable(tier)
}

// topNotes say which callers holding counters were not read: those in the part of the
// keyspace a partial answer did not cover, and those whose identity Redis keeps as a digest.
func topNotes(a *usage.Top) [][]string {
	var notes [][]string
	switch {
	case a.Truncated && a.Examined > 0 && a.Keys > 0:
		notes = append(notes, []string{fmt.Sprintf("(partial: about %s of the %s keys in Redis examined (%.1f%%): more callers may hold counters; --all reads them all)",
			grouped(a.Examined), grouped(a.Keys), 100*min(1, float64(a.Examined)/float64(a.Keys)))})
	case a.Truncated:
		notes = append(notes, []string{"(more callers hold counters than were read: --all reads them all)"})
	}
	switch {
	case a.Unreadable == 1:
		notes = append(notes, []string{"(1 caller with an identity over 128 bytes of key text not shown)"})
	case a.Unreadable > 1:
		notes = append(notes, []string{fmt.Sprintf("(%d callers with identities over 128 bytes of key text not shown)",
			a.Unreadable)})
	}
	return notes
}

// grouped is n (not negative) with its thousands separated by commas: 1,000,000.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// callerRows are a caller's rows, one per limit (one without limits); the caller, tier and
// decision are on the first only.
func callerRows(c *usage.TopCaller) [][]string {
	decision := "denied"
	if c.Allowed {
		decision = "allowed"
	}
	first := []string{printable(c.IdentityHash), printable(tierLabel(c.Tier)), decision}
	if len(c.Limits) == 0 {
		return [][]string{first}
	}
	rows := make([][]string, 0, len(c.Limits))
	for i, l := range c.Limits {
		lead := []string{"", "", ""}
		if i == 0 {
			lead = first
		}
		rows = append(rows, append(lead, printable(l.Name), itoa(l.Used), itoa(l.Quota), formatMs(l.ResetAfterMs)))
	}
	return rows
}
