package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

const (
	// maxAmount is the largest N of a grant or refund.
	maxAmount = 1_000_000_000
	// requestIDPrefix starts every request id the plugin generates.
	requestIDPrefix = "kubectl-"
	// maxRequestIDBytes is the longest request id the usage server takes; it takes printable
	// ASCII without spaces only (the id is quoted in the Event recording the change).
	maxRequestIDBytes = 256
)

// adjustLong ends the help of every command that changes a caller's counters.
const adjustLong = `

Give the identity as one argument, or a composite identity's parts with --part, one per part
in the policy's order.

Each change carries a request id: sent again with the same --request-id, it applies once (for
24 hours), and the answer says it was replayed. Without --request-id a new id is generated and
printed, so that a call whose outcome is unknown (a timeout, a 5xx answer) can be repeated
safely. You need the verb update on ratelimitpolicies/usage in the namespace.`

// adjustOp is one of the commands that change a caller's counters: reset, grant or refund.
type adjustOp struct {
	// name is the op, as the URL path names it.
	name string
	// done is its past tense, which starts the summary line.
	done string
	// takesAmount says whether the last argument is N.
	takesAmount bool
	// use, short, long and example are the command's help.
	use, short, long, example string
}

// adjustOptions are the flags and arguments of "kubectl ratelimit reset|grant|refund".
type adjustOptions struct {
	conn   *connectionOptions
	op     adjustOp
	parts  []string
	tier   string
	output string
	// requestID is --request-id, else the one generated (then generated is true).
	requestID    string
	requestIDSet bool
	generated    bool
	// policy, identity and amount are the arguments; hasIdentity tells an empty identity
	// from none.
	policy      string
	identity    string
	hasIdentity bool
	amount      int64
}

// newResetCommand is "kubectl ratelimit reset".
func newResetCommand(conn *connectionOptions) *cobra.Command {
	return newAdjustCommand(conn, adjustOp{
		name: "reset", done: "reset",
		use:   "reset POLICY [IDENTITY]",
		short: "Reset a caller's counters of a policy: every limit full again",
		long: `Reset a caller's counters of each limit of a RateLimitPolicy's tier: afterwards they count
nothing for the caller, grants included.`,
		example: `  kubectl ratelimit reset -n shop orders alice
  kubectl ratelimit reset -n shop per-tenant-method --part acme --part POST --tier gold`,
	})
}

// newGrantCommand is "kubectl ratelimit grant".
func newGrantCommand(conn *connectionOptions) *cobra.Command {
	return newAdjustCommand(conn, adjustOp{
		name: "grant", done: "granted", takesAmount: true,
		use:   "grant POLICY [IDENTITY] N",
		short: "Give a caller N units beyond each limit of a policy",
		long: `Give a caller N units (1 to 1000000000) beyond each limit of a RateLimitPolicy's tier, until
the limit's current window ends. On TokenBucket and GCRA limits the grant is a credit beyond the
burst, spent before the bucket's own tokens, for the bucket's refill time.`,
		example: `  kubectl ratelimit grant -n shop orders alice 100
  kubectl ratelimit grant -n shop per-tenant-method --part acme --part POST 5 --request-id incident-4711`,
	})
}

// newRefundCommand is "kubectl ratelimit refund".
func newRefundCommand(conn *connectionOptions) *cobra.Command {
	return newAdjustCommand(conn, adjustOp{
		name: "refund", done: "refunded", takesAmount: true,
		use:   "refund POLICY [IDENTITY] N",
		short: "Give back N units a caller was charged on each limit of a policy",
		long: `Give back N units (1 to 1000000000) a caller was charged on each limit of a RateLimitPolicy's
tier: never more than a limit holds when full, and grants are not touched.`,
		example: `  kubectl ratelimit refund -n shop orders alice 3
  kubectl ratelimit refund -n shop orders alice 3 --request-id ticket-812 -o json`,
	})
}

// newAdjustCommand is the command of op.
func newAdjustCommand(conn *connectionOptions, op adjustOp) *cobra.Command {
	o := &adjustOptions{conn: conn, op: op}
	minArgs := 1
	if op.takesAmount {
		minArgs = 2
	}
	cmd := &cobra.Command{
		Use:     op.use,
		Short:   op.short,
		Long:    op.long + adjustLong,
		Example: op.example,
		Args:    cobra.RangeArgs(minArgs, minArgs+1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.requestIDSet = cmd.Flags().Changed("request-id")
			if err := o.setArgs(args); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.parts, "part", nil,
		"`VALUE` of one part of a composite identity, repeated in the policy's order (instead of IDENTITY)")
	f.StringVar(&o.tier, "tier", "", "the `TIER` whose counters change (default: the one the policy chooses)")
	f.StringVar(&o.requestID, "request-id", "",
		"the `ID` that makes the change apply once (printable ASCII without spaces, at most 256 bytes): repeat a call with it to retry safely (default: a new one, printed)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// setArgs takes POLICY, then IDENTITY if given, then N for a grant or refund.
func (o *adjustOptions) setArgs(args []string) error {
	o.policy, args = args[0], args[1:]
	if o.op.takesAmount {
		n, err := parseAmount(args[len(args)-1])
		if err != nil {
			return err
		}
		o.amount, args = n, args[:len(args)-1]
	}
	if len(args) == 1 {
		o.identity, o.hasIdentity = args[0], true
	}
	return nil
}

// parseAmount is N: a whole number from 1 to maxAmount.
func parseAmount(arg string) (int64, error) {
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || n < 1 || n > maxAmount {
		return 0, fmt.Errorf("invalid N %q (the last argument): want a whole number from 1 to %d", arg, maxAmount)
	}
	return n, nil
}

// run sends the change to the usage server and prints its answer. When the plugin chose the
// request id and the outcome is unknown, the id goes to errOut, so that the call can be
// repeated safely.
func (o *adjustOptions) run(ctx context.Context, out, errOut io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	ns, client, err := o.conn.connect()
	if err != nil {
		return err
	}
	if err := o.ensureRequestID(); err != nil {
		return err
	}
	body, err := client.post(ctx,
		escapedPath("namespaces", ns, "ratelimitpolicies", o.policy, "usage", o.op.name), o.request())
	if err != nil {
		if o.generated && outcomeUnknown(err) {
			_, _ = fmt.Fprintln(errOut, requestIDLine(o.requestID))
		}
		return err
	}
	return o.print(out, errOut, body)
}

// validate checks the arguments before anything is sent.
func (o *adjustOptions) validate() error {
	switch {
	case o.policy == "":
		return errors.New("POLICY is empty")
	case o.hasIdentity && len(o.parts) > 0:
		return errIdentityAndParts
	case !o.hasIdentity && len(o.parts) == 0:
		return errors.New("no caller: give IDENTITY, or a composite identity's parts with --part")
	case o.hasIdentity && o.identity == "":
		return errors.New("IDENTITY is empty")
	case o.requestIDSet && strings.TrimSpace(o.requestID) == "":
		return errors.New("--request-id is empty: give the id of the change to retry, or leave the flag out for a new one")
	case o.requestIDSet && len(o.requestID) > maxRequestIDBytes:
		return fmt.Errorf("--request-id: at most %d bytes, got %d", maxRequestIDBytes, len(o.requestID))
	}
	if i := strings.IndexFunc(o.requestID, func(r rune) bool { return r < 0x21 || r > 0x7e }); o.requestIDSet && i >= 0 {
		return fmt.Errorf("--request-id: byte %d is not printable ASCII: use letters, digits and punctuation, without spaces", i)
	}
	return checkOutput(o.output)
}

// ensureRequestID generates a request id unless --request-id gave one.
func (o *adjustOptions) ensureRequestID() error {
	if o.requestIDSet {
		return nil
	}
	id, err := newRequestID()
	if err != nil {
		return err
	}
	o.requestID, o.generated = id, true
	return nil
}

// newRequestID is "kubectl-" and 16 random bytes in hex.
func newRequestID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a request id: %w", err)
	}
	return requestIDPrefix + hex.EncodeToString(b), nil
}

// request is the body to send: the caller, the tier if given, N and the request id.
func (o *adjustOptions) request() usage.AdjustRequest {
	return usage.AdjustRequest{Identity: o.identity, Parts: o.parts, Tier: o.tier, Amount: o.amount,
		RequestID: o.requestID}
}

// print prints the server's answer: as JSON (a generated request id to errOut), or as a
// summary line, notes and a table of the limits.
func (o *adjustOptions) print(out, errOut io.Writer, body []byte) error {
	if o.output == "json" && o.generated {
		if _, err := fmt.Fprintln(errOut, requestIDLine(o.requestID)); err != nil {
			return fmt.Errorf("writing the request id: %w", err)
		}
	}
	return printAnswer(out, o.output, body, func(a *usage.Adjusted) error {
		lines := []string{o.summary(a)}
		if o.generated {
			lines = append(lines, requestIDLine(o.requestID))
		}
		if a.Replayed {
			lines = append(lines, "replayed: an earlier request with this id already applied it; nothing changed now")
		}
		return writeAdjustTable(out, lines, a.Limits)
	})
}

// summary is the line that says what changed: "granted 5 to orders (tier gold) for caller
// <identity hash>".
func (o *adjustOptions) summary(a *usage.Adjusted) string {
	var b strings.Builder
	b.WriteString(o.op.done)
	if o.op.takesAmount {
		fmt.Fprintf(&b, " %d to", o.amount)
	}
	policy := a.Policy
	if policy == "" {
		policy = o.policy
	}
	b.WriteString(" " + printable(policy))
	if a.Tier != "" {
		b.WriteString(" (tier " + printable(a.Tier) + ")")
	}
	caller := identityLabel(o.identity, o.hasIdentity, o.parts)
	if a.IdentityHash != "" {
		caller = printable(a.IdentityHash)
	}
	return b.String() + " for caller " + caller
}

// requestIDLine tells the request id to repeat a call with.
func requestIDLine(id string) string {
	return "request id: " + id + " (repeat with --request-id to retry safely)"
}

// outcomeUnknown reports whether a change may have applied although err says the call
// failed: anything but a refusal before sending or an answer below 500.
func outcomeUnknown(err error) bool {
	if errors.Is(err, errNoBearerToken) {
		return false
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code >= 500
	}
	return true
}
