package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
)

// errNoBearerToken says the caller has no bearer token to send: the kubeconfig's user
// authenticates with a client certificate (or basic auth), which the usage server does not take.
var errNoBearerToken = errors.New("called directly (--server), the usage server authenticates bearer tokens, and the kubeconfig's user " +
	"gives none (client certificates and basic auth are not sent to it): leave out --server to go through the Kubernetes API server, " +
	`which takes any credential, or pass a token with --token, e.g. --token "$(kubectl create token SERVICEACCOUNT -n NAMESPACE)"`)

// authenticated wraps base so that each request carries the caller's bearer token: --token,
// else the kubeconfig user's static token, token file or exec credential plugin (run, and its
// token refreshed, as client-go does for kubectl). Only a bearer token leaves: a request
// without one fails with errNoBearerToken before anything is sent.
func (o *connectionOptions) authenticated(base http.RoundTripper) (http.RoundTripper, error) {
	creds, err := o.credentials()
	if err != nil {
		return nil, err
	}
	rt, err := transport.HTTPWrappersForConfig(creds, bearerOnly{next: base})
	if err != nil {
		return nil, fmt.Errorf("setting up the kubeconfig's credentials: %w", err)
	}
	return rt, nil
}

// credentials is the transport configuration whose wrappers add the caller's token. Its TLS
// part (the cluster's CA and client certificate) is never used; basic auth and impersonation
// are dropped, the usage server honouring neither.
func (o *connectionOptions) credentials() (*transport.Config, error) {
	if o.token != "" {
		return &transport.Config{BearerToken: o.token, UserAgent: userAgent}, nil
	}
	cfg, err := o.kubeConfig().ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, fmt.Errorf("no kubeconfig to take credentials from (pass --kubeconfig or --token): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading credentials from the kubeconfig: %w", err)
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("reading credentials from the kubeconfig: %w", err)
	}
	tc.Username, tc.Password = "", ""
	tc.Impersonate = transport.ImpersonationConfig{}
	tc.UserAgent = userAgent
	return tc, nil
}

// userAgent names the plugin to the usage server.
const userAgent = "kubectl-ratelimit"

// bearerOnly is the innermost round tripper: it lets a request go to the usage server only
// when the credential wrappers gave it a bearer token.
type bearerOnly struct {
	next http.RoundTripper
}

// RoundTrip sends req if it carries "Authorization: Bearer <token>", else fails with
// errNoBearerToken.
func (b bearerOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	scheme, token, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, errNoBearerToken
	}
	return b.next.RoundTrip(req)
}
