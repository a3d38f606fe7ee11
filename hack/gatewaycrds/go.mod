// Module gatewaycrds pins the gateway projects whose CustomResourceDefinitions
// test/integration/gateways installs into envtest, to check config/gateways against the real
// schemas. Nothing here is built: the test runs `go mod download -json <module>@<version>`
// in this directory (go.sum verifies each zip) for the versions below and reads the CRD YAML
// each module ships. Kept apart from the main go.mod so Envoy Gateway's and Traefik's
// dependency graphs never leak into the operator's; not `go mod tidy`-able for that reason
// (tidy would drop requirements no package imports).
//
//	istio.io/api                    kubernetes/customresourcedefinitions.gen.yaml
//	sigs.k8s.io/gateway-api         config/crd/standard/ (v1.7.0 needs a newer Go)
//	github.com/envoyproxy/gateway   charts/gateway-helm/charts/crds/crds/generated/
//	github.com/traefik/traefik/v3   docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml
//
// Also the kinds the Helm chart renders beyond Kubernetes' own, whose CRDs
// test/integration/helm installs to check the chart's objects: the prometheus-operator's
// ServiceMonitor and PrometheusRule (the root module's newest version on the module proxy is
// v0.85.0; the schemas of those two kinds are stable) and cert-manager's Certificate and Issuer:
//
//	github.com/prometheus-operator/prometheus-operator   example/prometheus-operator-crd/
//	github.com/cert-manager/cert-manager                 deploy/crds/
module ratelimit.dev/hack/gatewaycrds

go 1.26.0

require (
	github.com/cert-manager/cert-manager v1.21.2
	github.com/envoyproxy/gateway v1.9.1
	github.com/prometheus-operator/prometheus-operator v0.85.0
	github.com/traefik/traefik/v3 v3.7.13
	istio.io/api v1.32.0
	sigs.k8s.io/gateway-api v1.6.3
)
