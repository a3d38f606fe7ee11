package checkwire

// Request is the body of POST /v1/check.
type Request struct {
	// Policy names a policy of the sidecar's namespace.
	Policy string `json:"policy"`
	// Identity is the caller's identity; empty means none (the policy's onMissing applies).
	// A policy with a composite identity takes Parts instead.
	Identity string `json:"identity,omitempty"`
	// Parts are the values of a composite identity's parts, one per part in the policy's
	// order, each as the part yields it (a part of several sources: the source's position,
	// "=" and the value, as "1=10.0.0.0"); an empty value is a missing part (the policy's
	// onMissing applies). The same values on every front spend the same counters.
	Parts []string `json:"parts,omitempty"`
	// Cost is the weight; 0 means the policy's default.
	Cost int64 `json:"cost,omitempty"`
	// RequestID makes the check idempotent when the policy has idempotency.
	RequestID string `json:"requestId,omitempty"`
	// Fingerprint describes the request RequestID stands for, for example its method and
	// path: a seen request id replays its first decision only for the same policy,
	// identity, cost and fingerprint, and counts as a new request otherwise.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Tier names the tier whose limits apply, for a caller that knows its plan; empty
	// lets Request choose it by the policy's conditions, or the default tier without one.
	Tier string `json:"tier,omitempty"`
	// Request describes the request being limited, for the policy's tier conditions.
	Request *Attributes `json:"request,omitempty"`
	// Peek asks what a check of this request would decide now, debiting nothing: no count,
	// no lease, no request id recorded (a peek takes none: RequestID must be empty). The
	// answer carries every limit's usage (Response.Limits).
	Peek bool `json:"peek,omitempty"`
}

// Attributes are what a tier condition can read of the request being limited.
type Attributes struct {
	// Method is the request method.
	Method string `json:"method,omitempty"`
	// Host is the request's host.
	Host string `json:"host,omitempty"`
	// Path is the request's path.
	Path string `json:"path,omitempty"`
	// Headers are the request's headers, one value each.
	Headers map[string]string `json:"headers,omitempty"`
}
