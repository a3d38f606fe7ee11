package usageapi

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Subresource is the policy subresource whose verbs RBAC grants on usage: get reads it.
const Subresource = "usage"

// Guard decides who may do what: the user of a request the aggregation layer proxied (its
// front-proxy client certificate verified, FrontProxy) or of a bearer token (TokenReview),
// their right by SubjectAccessReview, all delegated to the Kubernetes API with
// k8s.io/apiserver's delegating authenticator and authorizer (cached: allowed for a minute,
// denied for 10 s).
type Guard struct {
	// Authn authenticates a request.
	Authn authenticator.Request
	// Authz authorizes a user's action.
	Authz authorizer.Authorizer
}

// NewGuard delegates to the API server cfg reaches. With proxy, requests the aggregation
// layer proxies are authenticated too (tried first; a request without a verified front-proxy
// certificate falls through to its bearer token, its X-Remote-* headers unread).
func NewGuard(cfg *rest.Config, client *http.Client, proxy *FrontProxy) (*Guard, error) {
	authn, err := authenticationv1.NewForConfigAndClient(cfg, client)
	if err != nil {
		return nil, fmt.Errorf("tokenreview client: %w", err)
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, client)
	if err != nil {
		return nil, fmt.Errorf("subjectaccessreview client: %w", err)
	}
	backoff := &wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 4}
	ac := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:               &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                time.Minute,
		TokenAccessReviewClient: authn, TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff: backoff,
	}
	if proxy != nil {
		ac.RequestHeaderConfig = proxy.config()
	}
	a, _, err := ac.New()
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	z, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             time.Minute, DenyCacheTTL: 10 * time.Second,
		WebhookRetryBackoff: backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &Guard{Authn: a, Authz: z}, nil
}

// Action is what a request asks to do: a verb on one policy's usage.
type Action struct {
	// Verb is the RBAC verb, e.g. get.
	Verb string
	// Namespace and Policy name the policy.
	Namespace, Policy string
}

// attributes are the SubjectAccessReview's: verb on ratelimitpolicies/usage of the policy.
func (a Action) attributes(u user.Info) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: a.Verb, Namespace: a.Namespace,
		APIGroup: v1alpha1.GroupVersion.Group, APIVersion: v1alpha1.GroupVersion.Version,
		Resource: "ratelimitpolicies", Subresource: Subresource, Name: a.Policy, ResourceRequest: true}
}

// Denied is a request the guard refused: Status 401 (no or a bad credential) or 403 (not
// allowed), Reason saying why in words that name no credential.
type Denied struct {
	// Status is the HTTP status answering it.
	Status int
	// Reason says why.
	Reason string
}

// Error implements error.
func (d *Denied) Error() string { return d.Reason }

// notAuthenticated is the reason of a 401.
const notAuthenticated = "not authenticated: send a bearer token the Kubernetes API accepts, or come through the Kubernetes API server (APIService " + APIServiceName + ")"

// Check authenticates r and authorizes act for its user. It returns the user, a *Denied
// when the request may not proceed, or another error when the Kubernetes API could not say.
func (g *Guard) Check(r *http.Request, act Action) (user.Info, error) {
	// A bad token is an error of the authenticator as much as a missing one is no answer:
	// either way the request is not authenticated, and the error may quote the token.
	res, ok, _ := g.Authn.AuthenticateRequest(r)
	if !ok {
		return nil, &Denied{Status: http.StatusUnauthorized, Reason: notAuthenticated}
	}
	decision, reason, err := g.Authz.Authorize(r.Context(), act.attributes(res.User))
	if err != nil && decision != authorizer.DecisionAllow {
		return nil, fmt.Errorf("subjectaccessreview for %s: %w", res.User.GetName(), err)
	}
	if decision != authorizer.DecisionAllow {
		msg := fmt.Sprintf("%s may not %s ratelimitpolicies/%s of %q in namespace %q (API group %s)",
			res.User.GetName(), act.Verb, Subresource, act.Policy, act.Namespace, v1alpha1.GroupVersion.Group)
		if reason != "" {
			msg += ": " + reason
		}
		return nil, &Denied{Status: http.StatusForbidden, Reason: msg}
	}
	return res.User, nil
}
