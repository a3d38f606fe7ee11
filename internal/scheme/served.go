package scheme

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Served reports whether the API server serves gvk, as m (the manager's RESTMapper, which
// asks discovery) knows it: a kind whose CRD is not installed is not served.
func Served(m meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}
