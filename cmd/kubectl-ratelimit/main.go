// Command kubectl-ratelimit is the kubectl plugin "kubectl ratelimit": it reads a caller's
// rate-limit usage, and a policy's callers under the most pressure, from the
// ratelimit-operator's usage server, and resets, grants or refunds a caller's counters
// through it.
//
// By default the plugin reaches the usage server through the Kubernetes API server, as
// kubectl top reaches metrics-server: the operator registers its usage API as the APIService
// v1alpha1.usage.ratelimit.dev, and the plugin calls /apis/usage.ratelimit.dev/v1alpha1/...
// with the kubeconfig's rest.Config, so every credential kubectl takes works (client
// certificates, tokens, OIDC, exec plugins) and none is handed to the operator (apiserver.go).
//
// With --server (or $RATELIMIT_USAGE_SERVER) it calls the usage server directly instead,
// trusting its certificate through --certificate-authority (the system's roots otherwise),
// never through the kubeconfig's cluster CA, and sending the kubeconfig user's bearer token
// (a static token, a token file or an exec credential plugin), which the usage server checks
// with a TokenReview; --token sends another. Client certificates are never sent to it.
// Either way the usage server authorizes with a SubjectAccessReview.
//
// Two subcommands need no usage server: lint checks policy files offline as the cluster would
// admit them (internal/lint), and explain reads the namespace's snapshot with the kubeconfig
// and plans a request on it as a sidecar would (then peeking through the usage API).
//
// Each kind of subcommand is one file (usage.go; top.go; adjust.go for reset, grant and
// refund; lint.go; explain.go); the flags, the HTTP client and the credentials all subcommands share are in
// client.go, apiserver.go and auth.go, the wire format in wire.go (and internal/usage).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
)

// main runs the plugin on the process's arguments and exits with its status.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the plugin with args and returns its exit status: 0 when the command did what
// was asked (a usage server's answer that a request would be denied included), 1 on any error,
// which it prints to stderr as "error: ...".
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		_, _ = fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// newRootCommand is "kubectl ratelimit" with its shared flags and every subcommand.
func newRootCommand() *cobra.Command {
	conn := &connectionOptions{}
	root := &cobra.Command{
		Use:   "kubectl-ratelimit",
		Short: "Read and change rate-limit usage, explain which policies judge a request, lint policy files",
		Long: `Read rate-limit usage through the ratelimit-operator's usage API: a caller's (usage), or
the callers of a policy under the most pressure (top); and change a caller's counters (reset,
grant, refund).

The usage API is reached through the Kubernetes API server (APIService
v1alpha1.usage.ratelimit.dev), with your kubeconfig as kubectl uses it: client certificates,
tokens, OIDC and exec plugins all work. Reading a namespace's usage needs get on
ratelimitpolicies/usage there in the API groups usage.ratelimit.dev (checked by the API
server) and policy.ratelimit.dev (checked by the operator); changing it needs create and
update there, respectively. The chart's ClusterRoles <release>-usage-reader and
<release>-usage-editor grant both.

With --server (or $RATELIMIT_USAGE_SERVER) the usage server is called directly instead: it
authenticates you with the bearer token of your kubeconfig's user (a static token, a token
file or an exec credential plugin) or --token, and --certificate-authority names the CA of
its certificate.

Explain which policies match a request, as whom and under which limits (explain: reads the
namespace's snapshot ConfigMap with your kubeconfig), and check policy files offline as the
cluster would admit them (lint).`,
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl ratelimit"},
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	conn.addFlags(root)
	root.AddCommand(newUsageCommand(conn), newTopCommand(conn),
		newResetCommand(conn), newGrantCommand(conn), newRefundCommand(conn),
		newLintCommand(conn), newExplainCommand(conn), newSidecarsCommand(conn))
	return root
}
