package controlplane

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/hack/localca"

	"k8s.io/apimachinery/pkg/util/wait"
)

// apiServiceGVK is apiregistration.k8s.io/v1 APIService (read as unstructured: the
// kube-aggregator module is not a dependency).
var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// APIService is an aggregated API served on this machine: Group/Version served at Addr
// (host:port on loopback), registered through the Service Namespace/Service.
type APIService struct {
	// Group and Version are the API's.
	Group, Version string
	// Namespace and Service name the Service the APIService points at.
	Namespace, Service string
	// Addr is where the server listens (127.0.0.1:port).
	Addr string
	// CABundle is the PEM CA the server's certificate chains to; the certificate must name
	// Service.Namespace.svc, the name the API server verifies.
	CABundle []byte
}

// NewAPIService is the APIService group/version served through the Service namespace/service,
// with a serving certificate for the name the API server verifies (ServiceDNSName, and
// localhost) written as tls.crt and tls.key into dir, signed by a fresh CA it names.
func NewAPIService(group, version, namespace, service, dir string) (*APIService, error) {
	ca, err := localca.New(group + "-serving-ca")
	if err != nil {
		return nil, err
	}
	api := &APIService{Group: group, Version: version, Namespace: namespace, Service: service, CABundle: ca.PEM}
	leaf, err := ca.Serving(api.ServiceDNSName(), "localhost")
	if err != nil {
		return nil, err
	}
	if _, _, err := leaf.Write(dir); err != nil {
		return nil, err
	}
	return api, nil
}

// Name is the APIService's name, version.group.
func (a *APIService) Name() string { return a.Version + "." + a.Group }

// ServiceDNSName is the name the API server verifies the server's certificate for.
func (a *APIService) ServiceDNSName() string { return a.Service + "." + a.Namespace + ".svc" }

// Register creates the namespace (when missing), an ExternalName Service naming localhost
// and the APIService at Addr's port. There is no kube-proxy in a test control plane:
// kube-apiserver resolves an ExternalName Service to externalName:port (ResolveCluster in
// k8s.io/apiserver/pkg/util/proxy) and dials that, verifying the certificate for
// ServiceDNSName. Unregister removes both.
func (a *APIService) Register(ctx context.Context, c client.Client) error {
	_, p, err := net.SplitHostPort(a.Addr)
	if err != nil {
		return fmt.Errorf("addr %q: %w", a.Addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("addr %q: %w", a.Addr, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", a.Namespace, err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Service},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("service %s/%s: %w", a.Namespace, a.Service, err)
	}
	api := &unstructured.Unstructured{}
	api.SetGroupVersionKind(apiServiceGVK)
	api.SetName(a.Name())
	api.Object["spec"] = map[string]any{
		"group": a.Group, "version": a.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		"caBundle": base64.StdEncoding.EncodeToString(a.CABundle),
		"service":  map[string]any{"namespace": a.Namespace, "name": a.Service, "port": int64(port)},
	}
	if err := c.Create(ctx, api); err != nil {
		return fmt.Errorf("apiservice %s: %w", a.Name(), err)
	}
	return nil
}

// Unregister deletes the APIService and its Service.
func (a *APIService) Unregister(ctx context.Context, c client.Client) error {
	api := &unstructured.Unstructured{}
	api.SetGroupVersionKind(apiServiceGVK)
	api.SetName(a.Name())
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Service}}
	return errors.Join(client.IgnoreNotFound(c.Delete(ctx, api)), client.IgnoreNotFound(c.Delete(ctx, svc)))
}

// Available waits until the APIService's Available condition is True, and says the last
// condition when it does not become so within timeout.
func (a *APIService) Available(ctx context.Context, c client.Client, timeout time.Duration) error {
	last := "no Available condition"
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		api := &unstructured.Unstructured{}
		api.SetGroupVersionKind(apiServiceGVK)
		if err := c.Get(ctx, client.ObjectKey{Name: a.Name()}, api); err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(api.Object, "status", "conditions")
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			if cond["type"] != "Available" {
				continue
			}
			last = fmt.Sprintf("%v %v: %v", cond["status"], cond["reason"], cond["message"])
			return cond["status"] == "True", nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("apiservice %s not Available: %s", a.Name(), last)
	}
	return nil
}
