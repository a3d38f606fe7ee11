package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// explainOptions are the flags of "kubectl ratelimit explain".
type explainOptions struct {
	conn     *connectionOptions
	method   string
	host     string
	target   string
	headers  []string
	clientIP string
	noPeek   bool
	output   string
}

// newExplainCommand is "kubectl ratelimit explain".
func newExplainCommand(conn *connectionOptions) *cobra.Command {
	o := &explainOptions{conn: conn}
	cmd := &cobra.Command{
		Use:   "explain --host HOST --path PATH [--method M] [-H 'Name: value']...",
		Short: "Show which policies a request matches, as whom, under which tier and limits, and what a check would answer now",
		Long: `Show how the namespace's sidecars would judge a request: which RateLimitPolicies match it on
the live snapshot (the ConfigMap ratelimit-snapshot the operator publishes, read with your
kubeconfig: you need get on that ConfigMap), the identity each reads from the request, the tier
and limits that apply and the cost; then, for each, what a check would answer now (a peek
through the usage API, as "kubectl ratelimit usage" asks; nothing is debited). With --no-peek,
or when the usage API cannot be asked, only the matching is shown (and why there is no peek).

The request is matched and read exactly as a sidecar reads it (the same code): headers, the
client address (--client-ip) for ClientIP identities, and tier conditions.`,
		Example: `  kubectl ratelimit explain -n shop --host api.example.com --path /v1/orders -H 'X-API-Key: alice'
  kubectl ratelimit explain -n shop --method POST --host api.example.com --path /v1/orders -H X-API-Key=alice -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.method, "method", http.MethodGet, "the request's `METHOD`")
	f.StringVar(&o.host, "host", "", "the request's `HOST` (its Host header)")
	f.StringVar(&o.target, "path", "/", "the request's `PATH`, with its query if any")
	f.StringArrayVarP(&o.headers, "header", "H", nil, "a request header, `'Name: value'` or Name=value; repeatable")
	f.StringVar(&o.clientIP, "client-ip", "", "the client's `IP` address as the sidecar sees it (for ClientIP identities)")
	f.BoolVar(&o.noPeek, "no-peek", false, "only match; do not ask the usage API what a check would answer")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// explained is one matched policy: how the request is read under it, and the peek's answer.
type explained struct {
	Policy      string           `json:"policy"`
	Identity    string           `json:"identity"`
	HasIdentity bool             `json:"hasIdentity"`
	Tier        string           `json:"tier"`
	Cost        int64            `json:"cost"`
	Limits      []snapshot.Limit `json:"limits"`
	// Peek is the usage server's answer, when asked.
	Peek json.RawMessage `json:"peek,omitempty"`
	// PeekError says why there is no answer.
	PeekError string `json:"peekError,omitempty"`
}

// explanation is the whole answer, as -o json prints it.
type explanation struct {
	Namespace       string      `json:"namespace"`
	SnapshotVersion string      `json:"snapshotVersion"`
	Request         string      `json:"request"`
	Policies        []explained `json:"policies"`
}

// run reads the snapshot, plans the request on it as a sidecar would, peeks each match and
// prints the result.
func (o *explainOptions) run(ctx context.Context, out io.Writer) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	req, err := o.request()
	if err != nil {
		return err
	}
	ns, err := o.conn.namespace()
	if err != nil {
		return err
	}
	set, err := o.snapshot(ctx, ns)
	if err != nil {
		return err
	}
	rules, checks, err := set.PlanHTTP(req)
	if err != nil {
		return fmt.Errorf("a sidecar would answer 400 Bad Request: %w", err)
	}
	ex := explanation{Namespace: ns, SnapshotVersion: set.Version, Request: o.method + " " + o.host + o.target}
	for i, r := range rules {
		ex.Policies = append(ex.Policies, describe(r, checks[i]))
	}
	o.peek(ctx, ns, ex.Policies)
	if o.output == "json" {
		body, err := json.Marshal(ex)
		if err != nil {
			return err
		}
		return writeJSON(out, body)
	}
	return writeExplanation(out, &ex)
}

// request is the request the flags describe, as a front reads it.
func (o *explainOptions) request() (*requestread.HTTPRequest, error) {
	if o.host == "" {
		return nil, errors.New("--host is required: policies match on the host")
	}
	path, query, err := requestread.ParseTarget(o.method, o.target)
	if err != nil {
		return nil, fmt.Errorf("--path: %w", err)
	}
	h := http.Header{}
	for _, line := range o.headers {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			name, value, ok = strings.Cut(line, "=")
		}
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--header %q: want 'Name: value' or Name=value", line)
		}
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return &requestread.HTTPRequest{Method: o.method, Host: o.host, Path: path, Query: query, Header: h, Peer: o.clientIP}, nil
}

// snapshot is namespace ns's published snapshot, compiled as its sidecars compile it.
func (o *explainOptions) snapshot(ctx context.Context, ns string) (*engine.Set, error) {
	cs, err := o.conn.kubeClient()
	if err != nil {
		return nil, err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, snapshot.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("namespace %s has no snapshot (ConfigMap %s): no policy applies there, every request passes", ns, snapshot.ConfigMapName)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the snapshot of namespace %s: %w", ns, err)
	}
	store := &engine.Store{Namespace: ns}
	if err := store.Load([]byte(cm.Data[snapshot.DataKey]), "kubectl"); err != nil {
		return nil, err
	}
	return store.Current(), nil
}

// describe is how check c reads under rule r: identity, tier, cost and the tier's limits.
func describe(r *engine.Rule, c engine.Check) explained {
	tier := c.Tier
	if tier == nil {
		tier = r.Default()
	}
	return explained{Policy: r.Name(), Identity: c.Identity, HasIdentity: c.HasIdentity, Tier: tier.Name,
		Cost: c.Cost, Limits: tier.Limits}
}

// peek asks the usage API what a check of each match would answer now, unless told not to;
// a failure is noted on the match, not fatal.
func (o *explainOptions) peek(ctx context.Context, ns string, matches []explained) {
	if len(matches) == 0 {
		return
	}
	reason := ""
	if o.noPeek {
		reason = "not asked (--no-peek)"
	}
	var client *usageClient
	if reason == "" {
		var err error
		if client, err = o.conn.newClient(); err != nil {
			reason = err.Error()
		}
	}
	for i := range matches {
		m := &matches[i]
		if reason != "" {
			m.PeekError = reason
			continue
		}
		body, err := client.get(ctx, escapedPath("namespaces", ns, "ratelimitpolicies", m.Policy, "usage"),
			peekQuery(m), http.StatusOK, http.StatusTooManyRequests)
		if err != nil {
			m.PeekError = err.Error()
			continue
		}
		m.Peek = body
	}
}

// peekQuery asks about m's caller, cost and tier (a tier its conditions chose: the usage
// server does not see the request; an override's tier it finds by the identity itself).
func peekQuery(m *explained) url.Values {
	q := url.Values{"cost": {strconv.FormatInt(m.Cost, 10)}}
	if m.HasIdentity {
		q.Set("identity", m.Identity)
	}
	if m.Tier != snapshot.DefaultTier && !strings.HasPrefix(m.Tier, engine.OverridePrefix) {
		q.Set("tier", m.Tier)
	}
	return q
}

// writeExplanation prints the matches, then each peek's answer:
//
//	GET api.example.com/v1/orders in namespace shop (snapshot 3f2a…)
//
//	POLICY   IDENTITY   TIER      COST   LIMITS
//	orders   alice      default   1      per-minute 60/1m0s
//
//	POLICY   TIER      IDENTITY   DECISION
//	orders   default   alice      allowed (per-minute: 59 left)
//	…
func writeExplanation(w io.Writer, ex *explanation) error {
	if _, err := fmt.Fprintf(w, "%s in namespace %s (snapshot %s)\n\n", printable(ex.Request), ex.Namespace, ex.SnapshotVersion); err != nil {
		return err
	}
	if len(ex.Policies) == 0 {
		_, err := fmt.Fprintln(w, "No policy matches: a sidecar passes the request unchecked.")
		return err
	}
	rows := [][]string{{"POLICY", "IDENTITY", "TIER", "COST", "LIMITS"}}
	for _, m := range ex.Policies {
		rows = append(rows, []string{m.Policy, identityLabel(m.Identity, m.HasIdentity, nil), m.Tier, itoa(m.Cost), limitsLabel(m.Limits)})
	}
	if err := writeRows(w, rows); err != nil {
		return err
	}
	for _, m := range ex.Policies {
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
		if err := writePeek(w, &m); err != nil {
			return err
		}
	}
	return nil
}

// writePeek prints one match's peek, or why there is none.
func writePeek(w io.Writer, m *explained) error {
	if m.Peek == nil {
		_, err := fmt.Fprintf(w, "%s: no peek: %s\n", m.Policy, printable(m.PeekError))
		return err
	}
	var a usageAnswer
	if err := json.Unmarshal(m.Peek, &a); err != nil {
		return fmt.Errorf("decoding the usage server's answer: %w", err)
	}
	if a.Policy == "" {
		a.Policy = m.Policy
	}
	return writeUsageTable(w, &a, identityLabel(m.Identity, m.HasIdentity, nil))
}

// limitsLabel is a tier's limits, "name requests/period" each (a calendar limit names its
// calendar).
func limitsLabel(ls []snapshot.Limit) string {
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		per := (time.Duration(l.PeriodMs) * time.Millisecond).String()
		if l.Calendar != nil {
			per = l.Calendar.String()
		}
		parts = append(parts, fmt.Sprintf("%s %d/%s", l.Name, l.Requests, per))
	}
	return strings.Join(parts, ", ")
}
