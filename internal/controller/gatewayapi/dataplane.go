package gatewayapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
)

// The data plane objects the controller maintains for attached policies. They are
// unstructured: the two fields of each kind written here do not justify Envoy Gateway's and
// Istio's Go modules (and their dependency trees) in the operator's go.mod; the envtest
// suite applies them against those projects' real CRDs.
var (
	// SecurityPolicyGVK is Envoy Gateway's SecurityPolicy.
	SecurityPolicyGVK = schema.GroupVersionKind{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Kind: "SecurityPolicy"}
	// AuthorizationPolicyGVK is Istio's AuthorizationPolicy.
	AuthorizationPolicyGVK = schema.GroupVersionKind{Group: "security.istio.io", Version: "v1", Kind: "AuthorizationPolicy"}
)

// LabelPolicyUID marks a data plane object with the UID of the RateLimitPolicy it serves.
const LabelPolicyUID = "policy.ratelimit.dev/policy-uid"

// fieldOwner is the server-side apply field manager of the data plane objects.
const fieldOwner = client.FieldOwner("ratelimit-operator")

// DataPlane keeps, for each policy with targetRefs, an Envoy Gateway SecurityPolicy (extAuth
// to the namespace's shared service) on its targets behind Envoy Gateway, and an Istio
// AuthorizationPolicy (CUSTOM, the namespace's ext_authz provider) on its Gateways run by
// Istio. Everything it writes is in the policy's namespace, owned by the policy.
type DataPlane struct {
	// Client writes (server-side apply, delete) and reads Gateways and GatewayClasses.
	Client client.Client
	// Reader lists the data plane objects, uncached (no informer on their kinds).
	Reader client.Reader
	// Implementations says which GatewayClasses are which implementation.
	Implementations attachment.Implementations
	// Service and Port are the namespace's shared ext_authz service (config/service).
	Service string
	// Port is the service's ext_authz gRPC port.
	Port int32
	// IstioProvider is the mesh config extension provider's name; "{namespace}" in it is
	// replaced by the policy's namespace.
	IstioProvider string
	// SecurityPolicies and AuthorizationPolicies say which kinds the API server serves.
	SecurityPolicies, AuthorizationPolicies bool
}

// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=securitypolicies,verbs=get;list;create;patch;delete
// +kubebuilder:rbac:groups=security.istio.io,resources=authorizationpolicies,verbs=get;list;create;patch;delete
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=ratelimitpolicies/finalizers,verbs=update

// kinds are the data plane kinds the API server serves.
func (d *DataPlane) kinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	if d.SecurityPolicies {
		out = append(out, SecurityPolicyGVK)
	}
	if d.AuthorizationPolicies {
		out = append(out, AuthorizationPolicyGVK)
	}
	return out
}

// Sync makes p's data plane objects match res: applies the wanted ones, deletes the rest.
func (d *DataPlane) Sync(ctx context.Context, p *v1alpha1.RateLimitPolicy, res *attachment.Result) error {
	if d == nil {
		return nil
	}
	want, err := d.desired(ctx, p, res)
	if err != nil {
		return err
	}
	var errs []error
	for _, u := range want {
		errs = append(errs, d.apply(ctx, p, u))
	}
	errs = append(errs, d.prune(ctx, p, want))
	return errors.Join(errs...)
}

// Remove deletes p's data plane objects (envtest and clusters without a garbage collector
// would otherwise keep them; the owner reference covers the others).
func (d *DataPlane) Remove(ctx context.Context, p *v1alpha1.RateLimitPolicy) error {
	if d == nil {
		return nil
	}
	return d.prune(ctx, p, nil)
}

// desired are the objects p's targets need, by implementation of their Gateways.
func (d *DataPlane) desired(ctx context.Context, p *v1alpha1.RateLimitPolicy, res *attachment.Result) ([]*unstructured.Unstructured, error) {
	if res == nil {
		return nil, nil
	}
	var egTargets []v1alpha1.TargetRef
	var istioGateways []string
	for _, a := range res.Attached {
		for _, gw := range a.Gateways {
			impl, err := d.implementation(ctx, gw)
			if err != nil {
				return nil, err
			}
			switch {
			case impl == attachment.EnvoyGateway && !slices.Contains(egTargets, a.Target):
				egTargets = append(egTargets, a.Target)
			case impl == attachment.Istio && gw.Namespace == p.Namespace && !slices.Contains(istioGateways, gw.Name):
				istioGateways = append(istioGateways, gw.Name)
			}
		}
	}
	var out []*unstructured.Unstructured
	if len(egTargets) > 0 && d.SecurityPolicies {
		out = append(out, d.securityPolicy(p, egTargets))
	}
	if len(istioGateways) > 0 && d.AuthorizationPolicies {
		out = append(out, d.authorizationPolicy(p, istioGateways))
	}
	return out, nil
}

// implementation is the implementation of a Gateway's class, "" when unknown or unmapped.
func (d *DataPlane) implementation(ctx context.Context, key types.NamespacedName) (attachment.Implementation, error) {
	var gw gwapiv1.Gateway
	if err := d.Client.Get(ctx, key, &gw); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	var class gwapiv1.GatewayClass
	err := d.Client.Get(ctx, types.NamespacedName{Name: string(gw.Spec.GatewayClassName)}, &class)
	switch {
	case apierrors.IsNotFound(err):
		return d.Implementations.Of(string(gw.Spec.GatewayClassName), ""), nil
	case err != nil:
		return "", fmt.Errorf("get gatewayclass %s: %w", gw.Spec.GatewayClassName, err)
	}
	return d.Implementations.Of(class.Name, string(class.Spec.ControllerName)), nil
}

// object is a data plane object of p, named after it, with its labels and owner reference.
func object(p *v1alpha1.RateLimitPolicy, gvk schema.GroupVersionKind, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(p.Namespace)
	u.SetName(DataPlaneName(p.Name))
	u.SetLabels(map[string]string{LabelPolicyUID: string(p.UID), "app.kubernetes.io/managed-by": "ratelimit-operator"})
	yes := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RateLimitPolicy",
		Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes}})
	return u
}

// DataPlaneName is the name of a policy's data plane objects.
func DataPlaneName(policy string) string { return "ratelimit-" + policy }

// securityPolicy is Envoy Gateway's extAuth to the namespace's shared service on targets.
func (d *DataPlane) securityPolicy(p *v1alpha1.RateLimitPolicy, targets []v1alpha1.TargetRef) *unstructured.Unstructured {
	refs := make([]any, 0, len(targets))
	for _, t := range targets {
		ref := map[string]any{"group": string(t.Group), "kind": string(t.Kind), "name": string(t.Name)}
		if t.SectionName != nil {
			ref["sectionName"] = string(*t.SectionName)
		}
		refs = append(refs, ref)
	}
	return object(p, SecurityPolicyGVK, map[string]any{
		"targetRefs": refs,
		"extAuth": map[string]any{
			"grpc":    map[string]any{"backendRefs": []any{map[string]any{"name": d.Service, "port": int64(d.Port)}}},
			"timeout": "500ms",
			// Redis outages are each policy's failureMode; this is the service being unreachable.
			"failOpen": true,
		},
	})
}

// authorizationPolicy is Istio's CUSTOM action with the namespace's provider on gateways.
func (d *DataPlane) authorizationPolicy(p *v1alpha1.RateLimitPolicy, gateways []string) *unstructured.Unstructured {
	slices.Sort(gateways)
	refs := make([]any, 0, len(gateways))
	for _, g := range gateways {
		refs = append(refs, map[string]any{"group": gwapiv1.GroupName, "kind": v1alpha1.KindGateway, "name": g})
	}
	return object(p, AuthorizationPolicyGVK, map[string]any{
		"targetRefs": refs,
		"action":     "CUSTOM",
		"provider":   map[string]any{"name": strings.ReplaceAll(d.IstioProvider, "{namespace}", p.Namespace)},
		// Every request through the Gateway is asked about; the policies' matches decide.
		"rules": []any{map[string]any{}},
	})
}

// apply server-side applies u unless an object of that name exists that p does not own: a
// policy never takes over another SecurityPolicy or AuthorizationPolicy.
func (d *DataPlane) apply(ctx context.Context, p *v1alpha1.RateLimitPolicy, u *unstructured.Unstructured) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(u.GroupVersionKind())
	err := d.Reader.Get(ctx, client.ObjectKeyFromObject(u), cur)
	if err == nil && cur.GetLabels()[LabelPolicyUID] != string(p.UID) {
		return fmt.Errorf("%s %s/%s exists and is not this policy's: rename it or the policy", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	if err := d.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), fieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// prune deletes p's objects that are not in want.
func (d *DataPlane) prune(ctx context.Context, p *v1alpha1.RateLimitPolicy, want []*unstructured.Unstructured) error {
	var errs []error
	for _, gvk := range d.kinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := d.Reader.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels{LabelPolicyUID: string(p.UID)}); err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", gvk.Kind, err))
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			if slices.ContainsFunc(want, func(w *unstructured.Unstructured) bool { return w.GetKind() == gvk.Kind && w.GetName() == o.GetName() }) {
				continue
			}
			if err := d.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete %s %s: %w", gvk.Kind, o.GetName(), err))
				continue
			}
			logf.FromContext(ctx).Info("deleted data plane object", "kind", gvk.Kind, "name", o.GetName())
		}
	}
	return errors.Join(errs...)
}
