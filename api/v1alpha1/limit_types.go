package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Algorithm is the counting algorithm a policy runs inside Redis.
// +kubebuilder:validation:Enum=TokenBucket;SlidingWindow;FixedWindow;GCRA
type Algorithm string

const (
	// AlgorithmTokenBucket refills requests/period continuously up to burst and debits each request.
	AlgorithmTokenBucket Algorithm = "TokenBucket"
	// AlgorithmSlidingWindow weights the previous window's count by its remaining overlap and adds the
	// current window's count.
	AlgorithmSlidingWindow Algorithm = "SlidingWindow"
	// AlgorithmFixedWindow counts requests in aligned windows of one period.
	AlgorithmFixedWindow Algorithm = "FixedWindow"
	// AlgorithmGCRA is the generic cell rate algorithm: one timestamp per identity, smooth spacing,
	// exact retry-after.
	AlgorithmGCRA Algorithm = "GCRA"
)

// Limit is one rate: requests per period, or per calendar day, week or month, with an
// optional burst.
//
// +kubebuilder:validation:XValidation:rule="has(self.period) != has(self.calendar)",message="set exactly one of period and calendar: a limit counts per period or per calendar window"
// +kubebuilder:validation:XValidation:rule="!has(self.period) || duration(self.period) >= duration('1ms')",message="period must be at least 1ms",fieldPath=".period"
// +kubebuilder:validation:XValidation:rule="!has(self.period) || duration(self.period) <= duration('8760h')",message="period must be at most 8760h (one year)",fieldPath=".period"
type Limit struct {
	// name identifies the limit in replies, headers and metrics, for example "per-second".
	// Unique within the policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// requests is how many requests (of cost 1) are allowed per period, or per calendar
	// window.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	Requests int64 `json:"requests"`

	// period is the length of the window, or the time in which a drained bucket refills, as a
	// duration such as "1s", "1m", "1h" or "500ms". Set exactly one of period and calendar.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	Period metav1.Duration `json:"period,omitzero"`

	// calendar counts requests per calendar day, week or month in a time zone instead of per
	// period: "3 per calendar month in Europe/Berlin" starts afresh at local midnight on the
	// 1st, whatever the month's length or its DST changes. Only for the FixedWindow
	// algorithm. Set exactly one of period and calendar.
	// +optional
	Calendar *CalendarPeriod `json:"calendar,omitempty"`

	// burst is the most requests admitted at once after an idle spell, for TokenBucket (the
	// bucket capacity) and GCRA (the burst tolerance). Defaults to requests. Not allowed for
	// the window algorithms.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	Burst *int64 `json:"burst,omitempty"`
}

// CalendarUnit is the length of a calendar window.
// +kubebuilder:validation:Enum=Day;Week;Month
type CalendarUnit string

const (
	// CalendarDay runs from local midnight to the next local midnight (23, 24 or 25 hours
	// where the zone changes to or from DST).
	CalendarDay CalendarUnit = "Day"
	// CalendarWeek runs from local midnight on Monday to the next Monday's (ISO 8601 weeks).
	CalendarWeek CalendarUnit = "Week"
	// CalendarMonth runs from local midnight on the 1st to the next month's 1st.
	CalendarMonth CalendarUnit = "Month"
)

// CalendarPeriod is a calendar window: a day, week or month bounded by the local midnights
// of an IANA time zone.
type CalendarPeriod struct {
	// unit is the window: Day, Week (Monday to Monday) or Month (the 1st to the 1st).
	// +required
	Unit CalendarUnit `json:"unit"`

	// timeZone is the IANA time zone whose midnights bound the windows, for example
	// "Europe/Berlin" or "America/New_York". Defaults to "UTC". "Local" is refused: the
	// machines that count may be in different zones.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`
}

// Cost is the weight a request debits.
//
// +kubebuilder:validation:XValidation:rule="!has(self.max) || self.max >= self.default",message="max must be at least default",fieldPath=".max"
// +kubebuilder:validation:XValidation:rule="!has(self.header) || has(self.max)",message="a request-supplied cost (header) needs max to bound it",fieldPath=".max"
type Cost struct {
	// default is the cost of a request that does not state its own.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Default int64 `json:"default,omitempty"`

	// header is an HTTP header from which a request may state its own cost (the Envoy front
	// uses hits_addend instead). Unset means requests cannot choose their cost on HTTP.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Header string `json:"header,omitempty"`

	// max is the largest cost a request may state; a request asking for more is refused.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Max *int64 `json:"max,omitempty"`

	// settle, when set, makes each request's cost known from its response, as an LLM API
	// reports the tokens a call used: the cost above (default, or the request's header) is
	// reserved when the request is admitted, and the cost the response states settles it in
	// one atomic call. A cost above the reservation is debited even past the limit (the
	// caller is then denied until it refills); one below it gives the difference back. A
	// response that states no cost, or a request that never ends, keeps the reservation.
	// The reverse-proxy front reads the response itself; the check API's callers settle
	// with its settle call.
	// +optional
	Settle *CostSettle `json:"settle,omitempty"`
}

// CostSettle says where a response states its request's cost.
//
// +kubebuilder:validation:XValidation:rule="has(self.header) || has(self.field)",message="name the response header or the JSON field that states the cost"
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || (duration(self.timeout) >= duration('1s') && duration(self.timeout) <= duration('24h'))",message="timeout must be between 1s and 24h",fieldPath=".timeout"
type CostSettle struct {
	// header is a response header, or trailer, whose value is the cost: a whole number.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Header string `json:"header,omitempty"`

	// field is a dot path to a whole number in the response's JSON body, for example
	// "usage.total_tokens": read from an application/json body of at most 1 MiB, or from
	// the data of the last event holding it in a text/event-stream response (as LLM APIs
	// stream usage), which passes through unbuffered. Up to 8 names of letters, digits,
	// '_' and '-'.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){0,7}$`
	Field string `json:"field,omitempty"`

	// timeout is how long after its admission a request may still settle its cost: each
	// admission's reservation is recorded in Redis for that long (one small key per request
	// in flight), and a settlement names it. A response that ends later keeps its
	// reservation. Make it longer than the longest response the policy admits. Defaults to
	// 10m.
	// +optional
	// +kubebuilder:default="10m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}
