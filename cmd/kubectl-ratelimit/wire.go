package main

import "github.com/ratelimit-dev/ratelimit-operator/internal/usage"

// usageAnswer is the usage server's answer to GET .../usage, with status 200 (a request of
// the cost would be admitted now) or 429 (it would be denied now): the check API's answer to
// a peek. Its limits are internal/usage's wire type, which imports nothing; the answer is
// decoded here rather than with the check API's type, so the plugin links no server code.
type usageAnswer struct {
	Policy          string        `json:"policy"`
	Allowed         bool          `json:"allowed"`
	Result          string        `json:"result"`
	Limit           string        `json:"limit"`
	Quota           int64         `json:"quota"`
	Remaining       int64         `json:"remaining"`
	RetryAfterMs    int64         `json:"retryAfterMs"`
	ResetAfterMs    int64         `json:"resetAfterMs"`
	Source          string        `json:"source"`
	SnapshotVersion string        `json:"snapshotVersion"`
	Tier            string        `json:"tier"`
	Peek            bool          `json:"peek"`
	Limits          []usage.Limit `json:"limits"`
}

// errorBody is the body of any other status: the usage server's {"error": ...}, or the
// Kubernetes API server's Status, whose message says why.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}
