package v1alpha1

// Match selects the requests a policy governs. A request matches when it matches any entry of
// http (HTTP and reverse-proxy fronts) or the envoy selector (Envoy RLS front).
//
// +kubebuilder:validation:XValidation:rule="has(self.http) || has(self.envoy)",message="match needs http or envoy (or both)"
type Match struct {
	// http lists HTTP request selectors; a request matches when it matches any one of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	HTTP []HTTPMatch `json:"http,omitempty"`

	// envoy selects Envoy RLS v3 requests by domain and descriptor entries.
	// +optional
	Envoy *EnvoyMatch `json:"envoy,omitempty"`
}

// HTTPMatch matches an HTTP request. Every non-empty field must match; an empty field matches
// anything, so an empty HTTPMatch matches every request.
type HTTPMatch struct {
	// hosts are the Host header values this entry matches, compared case-insensitively
	// without the port. A leading "*." matches any subdomain.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Hosts []string `json:"hosts,omitempty"`

	// pathPrefixes are URL path prefixes this entry matches, each starting with "/". A prefix
	// matches whole path segments: "/api" matches "/api" and "/api/x", not "/apix". Paths are
	// matched normalized (percent-decoded unreserved characters, merged slashes, dot
	// segments removed), ignoring ASCII case and ";" segment parameters, so every spelling
	// an upstream serves as "/api" matches; paths upstreams disagree on (an encoded slash, a
	// backslash, control bytes) are refused with 400 before any policy is checked.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`^/[^?#\s]*$`
	PathPrefixes []string `json:"pathPrefixes,omitempty"`

	// methods are the HTTP methods this entry matches, compared ignoring ASCII case; GET
	// also matches HEAD, which servers answer with the GET handler.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=9
	Methods []HTTPMethod `json:"methods,omitempty"`
}

// HTTPMethod is an HTTP request method.
// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE;OPTIONS;CONNECT;TRACE
type HTTPMethod string

// EnvoyMatch matches Envoy RLS v3 ShouldRateLimit requests.
type EnvoyMatch struct {
	// domain is the rate limit domain configured on the Envoy rate limit filter.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Domain string `json:"domain"`

	// descriptors are entries a request descriptor must contain to match. An entry with a
	// value matches only that value; an entry without a value matches any value of its key.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=16
	Descriptors []DescriptorMatch `json:"descriptors,omitempty"`
}

// DescriptorMatch matches one entry of an Envoy rate limit descriptor.
type DescriptorMatch struct {
	// key is the descriptor entry key, for example "remote_address" or "path".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Key string `json:"key"`

	// value is the exact entry value to match; omitted matches any value.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value,omitempty"`
}
