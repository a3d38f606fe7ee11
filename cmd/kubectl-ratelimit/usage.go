package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
)

// errIdentityAndParts refuses an identity given both as an argument and as parts.
var errIdentityAndParts = errors.New("IDENTITY and --part are mutually exclusive: give the identity as one argument, " +
	"or a composite identity's parts with --part")

// usageOptions are the flags and arguments of "kubectl ratelimit usage".
type usageOptions struct {
	conn    *connectionOptions
	parts   []string
	tier    string
	cost    int64
	costSet bool
	output  string
	// policy and identity are the arguments; hasIdentity tells an empty identity from none.
	policy      string
	identity    string
	hasIdentity bool
}

// newUsageCommand is "kubectl ratelimit usage".
func newUsageCommand(conn *connectionOptions) *cobra.Command {
	o := &usageOptions{conn: conn}
	cmd := &cobra.Command{
		Use:   "usage POLICY [IDENTITY]",
		Short: "Show what a caller has used of a policy's limits, and whether a request would pass now",
		Long: `Show what a caller has used of each limit of a RateLimitPolicy, and whether a request of
the given cost would be admitted now. Nothing is debited.

Give the identity as one argument, or a composite identity's parts with --part, one per part in
the policy's order. A request that would be denied is an answer, not an error: the exit status
is 0 either way.`,
		Example: `  kubectl ratelimit usage -n shop orders alice
  kubectl ratelimit usage -n shop per-tenant-method --part acme --part POST --cost 5 -o json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.costSet = cmd.Flags().Changed("cost")
			o.policy = args[0]
			if len(args) == 2 {
				o.identity, o.hasIdentity = args[1], true
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.parts, "part", nil,
		"`VALUE` of one part of a composite identity, repeated in the policy's order (instead of IDENTITY)")
	f.StringVar(&o.tier, "tier", "", "the `TIER` to read (default: the one the policy chooses)")
	f.Int64Var(&o.cost, "cost", 1, "the cost `N` of the request to ask about")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// run asks the usage server and prints its answer.
func (o *usageOptions) run(ctx context.Context, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	ns, client, err := o.conn.connect()
	if err != nil {
		return err
	}
	body, err := client.get(ctx, escapedPath("namespaces", ns, "ratelimitpolicies", o.policy, "usage"),
		o.query(), http.StatusOK, http.StatusTooManyRequests)
	if err != nil {
		return err
	}
	return printAnswer(out, o.output, body, func(a *usageAnswer) error {
		if a.Policy == "" {
			a.Policy = o.policy
		}
		return writeUsageTable(out, a, identityLabel(o.identity, o.hasIdentity, o.parts))
	})
}

// validate checks the arguments before anything is sent.
func (o *usageOptions) validate() error {
	if o.policy == "" {
		return errors.New("POLICY is empty")
	}
	if o.hasIdentity && len(o.parts) > 0 {
		return errIdentityAndParts
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	return nil
}

// query holds the parameters given, and only those: identity, each part in order, tier, cost.
func (o *usageOptions) query() url.Values {
	q := url.Values{}
	if o.hasIdentity {
		q.Set("identity", o.identity)
	}
	for _, p := range o.parts {
		q.Add("part", p)
	}
	if o.tier != "" {
		q.Set("tier", o.tier)
	}
	if o.costSet {
		q.Set("cost", strconv.FormatInt(o.cost, 10))
	}
	return q
}
