package podinject

import (
	"fmt"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
)

// Path is where the webhook is served; the chart's MutatingWebhookConfiguration calls it.
const Path = "/inject-v1-pod"

// The webhook reads each Pod's namespace labels through the manager's cache (the metadata
// informer the controllers share: list and watch, no get).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// Setup validates cfg and registers the webhook on the manager's webhook server.
func Setup(mgr ctrl.Manager, cfg inject.Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("sidecar injection: %w", err)
	}
	h := &Handler{Reader: mgr.GetClient(), Decoder: admission.NewDecoder(mgr.GetScheme()), Config: cfg}
	mgr.GetWebhookServer().Register(Path, &webhook.Admission{Handler: h, LogConstructor: logConstructor})
	return nil
}

// logConstructor names the Pod, its namespace and the user of each request in its log lines.
func logConstructor(base logr.Logger, req *admission.Request) logr.Logger {
	log := base.WithValues("webhookKind", "Pod", "webhook", "sidecar-injection")
	if req != nil {
		log = log.WithValues("namespace", req.Namespace, "name", req.Name, "user", req.UserInfo.Username, "requestID", req.UID)
	}
	return log
}
