package podinject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
)

// Handler injects the sidecar into the Pods the admission requests carry.
type Handler struct {
	// Reader reads the Pod's namespace (the manager's cached client).
	Reader client.Reader
	// Decoder decodes the Pod.
	Decoder admission.Decoder
	// Config is the installation's sidecar.
	Config inject.Config
}

var _ admission.Handler = &Handler{}

// Handle implements admission.Handler: a patch adding the sidecar, an allowed response for
// a Pod left alone, or a denial with the reason.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	log := logf.FromContext(ctx)
	resp, result := h.handle(ctx, req)
	injections.WithLabelValues(result).Inc()
	log.V(1).Info("sidecar injection", "result", result, "reason", resp.Result.Message)
	if result == ResultDenied {
		log.Info("refused a pod", "reason", resp.Result.Message)
	}
	return resp
}

// handle answers req and names the result for the metric.
func (h *Handler) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return admission.Allowed("only pod creation is injected"), ResultSkipped
	}
	pod := &corev1.Pod{}
	if err := h.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err)), ResultDenied
	}
	labels, err := h.namespaceLabels(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), ResultDenied
	}
	res, err := inject.Inject(pod, labels, h.Config)
	if err != nil {
		return denied(err), ResultDenied
	}
	if !res.Inject {
		return admission.Allowed(res.Reason), ResultSkipped
	}
	resp, err := patch(pod, res.Pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), ResultDenied
	}
	resp.Result = &metav1.Status{Message: res.Reason, Code: http.StatusOK}
	return resp, ResultInjected
}

// namespaceLabels reads the labels of namespace ns from the cache (metadata only).
func (h *Handler) namespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: ns}, obj); err != nil {
		return nil, fmt.Errorf("read namespace %s: %w", ns, err)
	}
	return obj.Labels, nil
}

// denied refuses the Pod with err's message, which names the annotation to fix.
func denied(err error) admission.Response {
	var ae *inject.AnnotationError
	if errors.As(err, &ae) {
		return admission.Denied("ratelimit sidecar injection: " + ae.Error())
	}
	return admission.Denied("ratelimit sidecar injection: " + err.Error())
}

// patch is the JSON patch from pod, as decoded, to injected: only the additions, since both
// sides went through the same encoding.
func patch(pod, injected *corev1.Pod) (admission.Response, error) {
	from, err := json.Marshal(pod)
	if err != nil {
		return admission.Response{}, fmt.Errorf("encode pod: %w", err)
	}
	to, err := json.Marshal(injected)
	if err != nil {
		return admission.Response{}, fmt.Errorf("encode injected pod: %w", err)
	}
	return admission.PatchResponseFromRaw(from, to), nil
}
