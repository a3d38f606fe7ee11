package usageapi

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
)

// Discovery documents the aggregation layer and kubectl read: the aggregator probes
// GET /apis/<group>/<version> for a 2xx before it marks the APIService Available, and reads
// /apis (falling back to the group version's document when /apis is not an aggregated
// discovery list, as this plain APIGroupList is not) to publish the group in the API
// server's own discovery.
const (
	// DiscoveryRoot lists the group.
	DiscoveryRoot = "/apis"
	// DiscoveryGroup describes the group.
	DiscoveryGroup = "/apis/" + Group
)

// discovery mounts the discovery documents. They say nothing secret, yet are answered to
// authenticated callers only (the aggregator is one: it probes with its front-proxy
// certificate), as everything else here.
func (s *Server) discovery() {
	version := metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + Version, Version: Version}
	group := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: Group,
		Versions: []metav1.GroupVersionForDiscovery{version}, PreferredVersion: version}
	s.mux.HandleFunc("GET "+DiscoveryRoot, s.authenticated(&metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{group}}))
	s.mux.HandleFunc("GET "+DiscoveryGroup, s.authenticated(&group))
	s.mux.HandleFunc("GET "+AggregatedPrefix, s.authenticated(ResourceList()))
}

// ResourceList is the group version's APIResourceList: the usage subresource of
// ratelimitpolicies, namespaced, with the verbs the API server's authorizer names its
// requests by (get for reads and overviews, create for a reset, refund or grant, which
// are POSTs).
func ResourceList() *metav1.APIResourceList {
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version,
		APIResources: []metav1.APIResource{{
			Name: "ratelimitpolicies/" + Subresource, Namespaced: true, Kind: "Usage",
			Verbs: metav1.Verbs{"get", "create"},
		}},
	}
}

// authenticated answers doc as JSON to an authenticated caller, 401 to anyone else.
func (s *Server) authenticated(doc any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok, _ := s.guard.Authn.AuthenticateRequest(r); !ok {
			jsonreply.Error(w, http.StatusUnauthorized, notAuthenticated)
			return
		}
		jsonreply.Write(w, http.StatusOK, doc)
	}
}
