package manifests

import "github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"

// HelmBinary is the helm the tests run (controlplane.HelmBinary).
func HelmBinary() (string, error) { return controlplane.HelmBinary() }

// HelmTemplate renders charts/ratelimit-operator with `helm template release chart
// --namespace ns` and the --set values (controlplane.HelmTemplate), and returns its
// documents.
func HelmTemplate(release, ns string, set ...string) ([]Doc, error) {
	out, err := controlplane.HelmTemplate(release, ns, set...)
	if err != nil {
		return nil, err
	}
	return Split(out)
}
