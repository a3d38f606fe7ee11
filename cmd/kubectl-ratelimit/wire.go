package main

// usageAnswer is the usage server's answer to GET .../usage, with status 200 (a request of
// the cost would be admitted now) or 429 (it would be denied now). The plugin keeps its own
// copy of the wire format rather than importing the server's types.
type usageAnswer struct {
	Policy          string       `json:"policy"`
	Allowed         bool         `json:"allowed"`
	Result          string       `json:"result"`
	Limit           string       `json:"limit"`
	Quota           int64        `json:"quota"`
	Remaining       int64        `json:"remaining"`
	RetryAfterMs    int64        `json:"retryAfterMs"`
	ResetAfterMs    int64        `json:"resetAfterMs"`
	Source          string       `json:"source"`
	SnapshotVersion string       `json:"snapshotVersion"`
	Tier            string       `json:"tier"`
	Peek            bool         `json:"peek"`
	Limits          []limitUsage `json:"limits"`
}

// limitUsage is one limit of the tier for the identity: its quota, what is used and left,
// when it is full again, and how long a request of the cost would wait on it (-1: never).
type limitUsage struct {
	Name         string `json:"name"`
	Quota        int64  `json:"quota"`
	Used         int64  `json:"used"`
	Remaining    int64  `json:"remaining"`
	ResetAfterMs int64  `json:"resetAfterMs"`
	RetryAfterMs int64  `json:"retryAfterMs"`
}

// errorBody is the body of any other status.
type errorBody struct {
	Error string `json:"error"`
}
