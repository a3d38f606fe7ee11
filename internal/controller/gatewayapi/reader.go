package gatewayapi

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
)

// Retry is how long a policy waits to retry its attachment after an error (reading the
// targets, or writing the gateways' objects).
const Retry = 5 * time.Second

// Reader reads the Gateway API objects policies attach to and resolves the attachment of a
// namespace's policies (internal/attachment). Both the policy controller (status) and the
// snapshot controller (what sidecars enforce) call it, so they decide alike.
type Reader struct {
	client.Client
	// Enabled is true when the API server serves Gateway API (HTTPRoute and Gateway);
	// without it every target is not found.
	Enabled bool
	// GRPCRoutes is true when GRPCRoute is served too.
	GRPCRoutes bool

	memo resolutions // each namespace's last resolution
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes;grpcroutes;gatewayclasses,verbs=list;watch

// NewReader returns the reader, with what the API server serves.
func NewReader(c client.Client, m meta.RESTMapper) *Reader {
	return &Reader{Client: c,
		Enabled:    served(m, v1alpha1.KindHTTPRoute) && served(m, v1alpha1.KindGateway),
		GRPCRoutes: served(m, v1alpha1.KindGRPCRoute)}
}

// served reports whether the API server serves the Gateway API v1 kind.
func served(m meta.RESTMapper, kind string) bool {
	return scheme.Served(m, schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: kind})
}

// Resolve resolves the attachment of the namespace's policies; nil when none has targetRefs.
// The namespace is resolved once per state of its policies, routes and Gateways: callers
// over the same state share the results, and must not change them.
func (g *Reader) Resolve(ctx context.Context, ns string, policies []v1alpha1.RateLimitPolicy) (map[string]*attachment.Result, error) {
	if !anyAttached(policies) {
		g.memo.put(ns, [32]byte{}, nil)
		return nil, nil
	}
	in, err := g.inputs(ctx, ns)
	if err != nil {
		return nil, err
	}
	fp := fingerprint(in, policies)
	if results, ok := g.memo.get(ns, fp); ok {
		return results, nil
	}
	results := attachment.Resolve(in, policies)
	g.memo.put(ns, fp, results)
	return results, nil
}

// ResolveFor resolves p's namespace and returns p's result; nil for a policy without targetRefs.
func (g *Reader) ResolveFor(ctx context.Context, p *v1alpha1.RateLimitPolicy) (*attachment.Result, error) {
	if len(p.Spec.TargetRefs) == 0 {
		return nil, nil
	}
	// Read only (Resolve never changes them), so not copied out of the cache.
	var list v1alpha1.RateLimitPolicyList
	if err := g.List(ctx, &list, client.InNamespace(p.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list policies in %s: %w", p.Namespace, err)
	}
	items := list.Items
	if i := slices.IndexFunc(items, func(o v1alpha1.RateLimitPolicy) bool { return o.Name == p.Name }); i >= 0 {
		items[i] = *p // the reconciled version, which the cache may not show yet
	} else {
		items = append(items, *p)
	}
	results, err := g.Resolve(ctx, p.Namespace, items)
	if err != nil {
		return nil, err
	}
	if r := results[p.Name]; r != nil {
		own := *r // the caller's to change: the results are shared
		own.Ancestors = slices.Clone(r.Ancestors)
		return &own, nil
	}
	return &attachment.Result{}, nil // being deleted
}

func anyAttached(policies []v1alpha1.RateLimitPolicy) bool {
	for i := range policies {
		if len(policies[i].Spec.TargetRefs) > 0 {
			return true
		}
	}
	return false
}

// inputs reads the namespace's routes and Gateways, and the other namespaces' Gateways its
// routes attach to (read only, for their listeners' hostnames).
func (g *Reader) inputs(ctx context.Context, ns string) (attachment.Inputs, error) {
	in := attachment.Inputs{Namespace: ns}
	if !g.Enabled {
		in.Unserved = "the API server did not serve Gateway API (HTTPRoute, Gateway) when the manager started; install its CRDs and restart the manager"
		return in, nil
	}
	// Read only (fingerprinted and resolved), so not copied out of the cache.
	var gws gwapiv1.GatewayList
	var hrs gwapiv1.HTTPRouteList
	if err := g.List(ctx, &gws, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("list gateways in %s: %w", ns, err)
	}
	if err := g.List(ctx, &hrs, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("list httproutes in %s: %w", ns, err)
	}
	in.Gateways, in.HTTPRoutes = gws.Items, hrs.Items
	if g.GRPCRoutes {
		var grs gwapiv1.GRPCRouteList
		if err := g.List(ctx, &grs, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return in, fmt.Errorf("list grpcroutes in %s: %w", ns, err)
		}
		in.GRPCRoutes = grs.Items
	}
	g.addForeignParents(ctx, &in)
	return in, nil
}

// addForeignParents adds the Gateways of other namespaces that the routes attach to.
func (g *Reader) addForeignParents(ctx context.Context, in *attachment.Inputs) {
	seen := map[types.NamespacedName]bool{}
	var parents []gwapiv1.ParentReference
	for _, r := range in.HTTPRoutes {
		parents = append(parents, r.Spec.ParentRefs...)
	}
	for _, r := range in.GRPCRoutes {
		parents = append(parents, r.Spec.ParentRefs...)
	}
	for _, p := range parents {
		if p.Namespace == nil || string(*p.Namespace) == in.Namespace || (p.Kind != nil && *p.Kind != v1alpha1.KindGateway) {
			continue
		}
		key := types.NamespacedName{Namespace: string(*p.Namespace), Name: string(p.Name)}
		if seen[key] {
			continue
		}
		seen[key] = true
		var gw gwapiv1.Gateway
		switch err := g.Get(ctx, key, &gw); {
		case apierrors.IsNotFound(err):
		case err != nil:
			// Only a route without hostnames needs it (its listeners' hostnames); without
			// it, such a route governs every host. Not worth failing the namespace for.
			logf.FromContext(ctx).V(1).Info("parent gateway of another namespace unreadable", "gateway", key, "reason", err.Error())
		default:
			in.Gateways = append(in.Gateways, gw)
		}
	}
}

// RouteNamespaces maps a Gateway event to its namespace and the namespaces of the routes that
// attach to it; a route event maps to its namespace.
func (g *Reader) RouteNamespaces(ctx context.Context, o client.Object) []string {
	out := []string{o.GetNamespace()}
	if _, ok := o.(*gwapiv1.Gateway); !ok {
		return out
	}
	var hrs gwapiv1.HTTPRouteList
	if err := g.List(ctx, &hrs); err != nil {
		return out
	}
	for _, r := range hrs.Items {
		if attachesTo(r.Spec.ParentRefs, o) {
			out = append(out, r.Namespace)
		}
	}
	var grs gwapiv1.GRPCRouteList
	if !g.GRPCRoutes || g.List(ctx, &grs) != nil {
		return out
	}
	for _, r := range grs.Items {
		if attachesTo(r.Spec.ParentRefs, o) {
			out = append(out, r.Namespace)
		}
	}
	return out
}

// attachesTo reports whether parents name the Gateway gw of another namespace.
func attachesTo(parents []gwapiv1.ParentReference, gw client.Object) bool {
	return slices.ContainsFunc(parents, func(p gwapiv1.ParentReference) bool {
		return p.Namespace != nil && string(*p.Namespace) == gw.GetNamespace() && string(p.Name) == gw.GetName()
	})
}

// Watched are the Gateway API objects whose changes move what policies govern.
func (g *Reader) Watched() []client.Object {
	if !g.Enabled {
		return nil
	}
	out := []client.Object{&gwapiv1.Gateway{}, &gwapiv1.HTTPRoute{}}
	if g.GRPCRoutes {
		out = append(out, &gwapiv1.GRPCRoute{})
	}
	return out
}
