package engine

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Metrics are the sidecar's Prometheus series. A nil *Metrics records nothing.
type Metrics struct {
	decisions     *prometheus.CounterVec
	peeks         *prometheus.CounterVec
	checkSeconds  *prometheus.HistogramVec
	redisErrors   *prometheus.CounterVec
	withoutRedis  *prometheus.CounterVec
	denyCacheHits *prometheus.CounterVec
	leaseUnits    *prometheus.HistogramVec
	leaseReturned *prometheus.CounterVec
	leaseHeld     *prometheus.CounterVec
	settlements   *prometheus.CounterVec
	reservations  *prometheus.CounterVec
	settledCost   *prometheus.CounterVec
	releases      *prometheus.CounterVec
	snapshotInfo  *prometheus.GaugeVec
	snapshotLoads *prometheus.CounterVec
	snapshotTime  prometheus.Gauge
	policies      prometheus.Gauge
	refused       prometheus.Gauge
	// pipelined is the engine whose limiter's pipelines are exported (CountPipelines).
	pipelined atomic.Pointer[Engine]
}

// NewMetrics creates the series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_decisions_total",
			Help: "Decisions by front, policy, limit (the denying one, or the tightest for an admission; empty when no limit decided), result (allowed, denied, shadow_denied, skipped, rejected) and source."},
			[]string{"front", "policy", "limit", "result", "source"}),
		peeks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_peeks_total",
			Help: "Peeks (checks that debit nothing) by front, policy and result; they are not counted in ratelimit_sidecar_decisions_total."},
			[]string{"front", "policy", "result"}),
		checkSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ratelimit_sidecar_check_duration_seconds",
			Help:    "Time to decide one policy check, by source (Redis is the script round trip including pipelining).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}},
			[]string{"source"}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_redis_errors_total",
			Help: "Checks Redis did not answer (error, timeout or open circuit), by policy."}, []string{"policy"}),
		withoutRedis: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_decisions_without_redis_total",
			Help: "Decisions made by a failure mode because Redis could not be asked, by failure mode and result."},
			[]string{"failure_mode", "result"}),
		denyCacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_deny_cache_hits_total",
			Help: "Denials answered by the local deny cache without asking Redis, by policy."}, []string{"policy"}),
		leaseUnits: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ratelimit_sidecar_lease_units",
			Help:    "Units granted per lease call for a hot identity (0: refused, too little left), by policy; the count is the lease calls to Redis.",
			Buckets: []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}}, []string{"policy"}),
		leaseReturned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_lease_returned_units_total",
			Help: "Leased units returned to Redis unspent, by policy."}, []string{"policy"}),
		leaseHeld: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_lease_held_units_total",
			Help: "Leased units never spent because not every Redis replica acknowledged the lease in time (or ROLE and WAIT were refused: the Redis user needs +role +wait), by policy; Redis decided those checks one by one."},
			[]string{"policy"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_settlements_total",
			Help: "Admissions settled at the cost their response stated (cost.settle), by front, policy and result: charged (cost above the reservation), unreserved (below), exact, unstated (the response stated none: the reservation stands), refused (no reservation of the caller and policy by that id, or one settled before at another cost: nothing changed), failed (Redis did not settle: the reservation stands)."},
			[]string{"front", "policy", "result"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_reservations_total",
			Help: "Admissions of policies whose cost their response settles (cost.settle), by front, policy and result: recorded (its response may settle it), failed (Redis did not record it: the reservation stands and cannot be settled)."},
			[]string{"front", "policy", "result"}),
		settledCost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_settled_cost_total",
			Help: "Cost stated by responses and settled (LLM tokens, for instance), by policy."}, []string{"policy"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_slot_releases_total",
			Help: "Slots of concurrency limits given back when their request ended, by front, policy and result: freed, gone (released before, or expired), failed (Redis did not answer: the slot comes back when it expires)."},
			[]string{"front", "policy", "result"}),
		snapshotInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ratelimit_sidecar_snapshot_info",
			Help: "1 for the snapshot in force, labelled with its namespace and version."}, []string{"namespace", "version"}),
		snapshotLoads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_sidecar_snapshot_loads_total",
			Help: "Snapshot documents handed to the sidecar, by result (loaded, refused)."}, []string{"result"}),
		snapshotTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ratelimit_sidecar_snapshot_last_loaded_timestamp_seconds",
			Help: "Unix time of the last good snapshot load."}),
		policies: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ratelimit_sidecar_policies",
			Help: "Policies in the snapshot in force."}),
		refused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ratelimit_sidecar_snapshot_policies_refused",
			Help: "Policies of the snapshot in force that this sidecar could not compile (each runs its last good version, or not at all)."}),
	}
	reg.MustRegister(m.decisions, m.peeks, m.checkSeconds, m.redisErrors, m.withoutRedis, m.denyCacheHits, m.leaseUnits, m.leaseReturned, m.leaseHeld,
		m.settlements, m.reservations, m.settledCost, m.releases,
		m.snapshotInfo, m.snapshotLoads, m.snapshotTime, m.policies, m.refused,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ratelimit_sidecar_redis_pipelines_total",
			Help: "Redis pipelines (round trips) the limiter sent; pipelined_checks_total over this is the mean batch."},
			m.pipelineStat(func(pipelines, _ uint64) uint64 { return pipelines })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ratelimit_sidecar_redis_pipelined_checks_total",
			Help: "Checks the limiter sent to Redis in pipelines."},
			m.pipelineStat(func(_, checks uint64) uint64 { return checks })))
	m.registerErrorKinds(reg)
	reg.MustRegister(hotIdentities{m: m, desc: prometheus.NewDesc("ratelimit_sidecar_hot_identity_checks_per_second",
		fmt.Sprintf("The %d hottest identities this sidecar serves from leases (seen within the last second), by policy and identity_hash (the first 16 hex digits of the SHA-256 of the identity as encoded in Redis keys; never the identity, which is often a credential): a bounded top list, whatever the number of identities.", HotTopN),
		[]string{"policy", "identity_hash"}, nil)})
	return m
}

// IdentityHash is how metrics name an identity (snapshot.IdentityHash): metrics outlive the
// request and reach people who must not see credentials, and an identity is often one.
func IdentityHash(identity string) string { return snapshot.IdentityHash(identity) }

// HotTopN is how many hot identities ratelimit_sidecar_hot_identity_checks_per_second lists.
const HotTopN = 10

// hotIdentities exports the limiter's hottest leased identities, fresh at every scrape: an
// identity that cools down leaves the list, so the series stay at most HotTopN.
type hotIdentities struct {
	m    *Metrics
	desc *prometheus.Desc
}

// Describe sends the one descriptor.
func (h hotIdentities) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect sends the current top list.
func (h hotIdentities) Collect(ch chan<- prometheus.Metric) {
	e := h.m.pipelined.Load()
	if e == nil || e.limiter() == nil {
		return
	}
	for _, hi := range e.limiter().HotIdentities(HotTopN) {
		ch <- prometheus.MustNewConstMetric(h.desc, prometheus.GaugeValue, hi.Rate, hi.Policy, IdentityHash(hi.Identity))
	}
}

// errorKinds are the labels of ratelimit_sidecar_redis_check_errors_total and where each
// count comes from.
var errorKinds = []struct {
	kind  string
	count func(limiter.ErrorStats) uint64
}{
	{"node", func(s limiter.ErrorStats) uint64 { return s.Node }},
	{"topology", func(s limiter.ErrorStats) uint64 { return s.Topology }},
	{"call", func(s limiter.ErrorStats) uint64 { return s.Call }},
	{"local", func(s limiter.ErrorStats) uint64 { return s.Local }},
	{"circuit_open", func(s limiter.ErrorStats) uint64 { return s.CircuitOpen }},
}

// registerErrorKinds exports the limiter's ErrorStats: checks Redis did not decide, by why.
// "call" errors (CROSSSLOT, NOPERM, script errors) are one policy's fault and never open a
// node's breaker; "node" errors do.
func (m *Metrics) registerErrorKinds(reg prometheus.Registerer) {
	for _, k := range errorKinds {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ratelimit_sidecar_redis_check_errors_total",
			Help:        "Checks Redis did not decide, by kind: node (no answer in time, or a node that serves no one), topology (a stale slot map), call (the call's or its policy's own fault: CROSSSLOT, NOPERM, script errors), local (queue full, caller gone), circuit_open.",
			ConstLabels: prometheus.Labels{"kind": k.kind}},
			func() float64 {
				if e := m.pipelined.Load(); e != nil {
					if l := e.limiter(); l != nil {
						return float64(k.count(l.ErrorStats()))
					}
				}
				return 0
			}))
	}
}

// CountPipelines exports the pipelines of e's limiter (once it has one; it is set once).
func (m *Metrics) CountPipelines(e *Engine) { m.pipelined.Store(e) }

func (m *Metrics) pipelineStat(pick func(pipelines, checks uint64) uint64) func() float64 {
	return func() float64 {
		if e := m.pipelined.Load(); e != nil {
			if l := e.limiter(); l != nil {
				return float64(pick(l.PipelineStats()))
			}
		}
		return 0
	}
}

// decided records one policy check.
func (m *Metrics) decided(front string, o *Outcome, took time.Duration) {
	if m == nil {
		return
	}
	if o.Peeked {
		m.peeks.WithLabelValues(front, o.Rule.Name(), o.Result()).Inc()
		return
	}
	d := &o.Decision
	source := string(d.Source)
	if o.Skipped || o.Rejected {
		source = "none"
	}
	// The limit is bounded like the policy: a policy has at most 8 named limits. It is the
	// limiter's LimitName (the denying limit, or the tightest on an admission), empty when
	// no limit decided: skipped, rejected, or a failure mode without Redis.
	m.decisions.WithLabelValues(front, o.Rule.Name(), d.LimitName, o.Result(), source).Inc()
	if o.Skipped || o.Rejected {
		return
	}
	m.checkSeconds.WithLabelValues(source).Observe(took.Seconds())
	switch {
	case d.Source == limiter.SourceDenyCache:
		m.denyCacheHits.WithLabelValues(o.Rule.Name()).Inc()
	case d.WithoutRedis():
		m.redisErrors.WithLabelValues(o.Rule.Name()).Inc()
		m.withoutRedis.WithLabelValues(o.Rule.Entry.FailureMode, o.Result()).Inc()
	}
}

// settled records one settlement of o at cost (0 when the response stated none).
func (m *Metrics) settled(front string, o *Outcome, result string, cost int64) {
	if m == nil {
		return
	}
	m.settlements.WithLabelValues(front, o.Rule.Name(), result).Inc()
	if result != SettleFailed && result != SettleUnstated && result != SettleRefused {
		m.settledCost.WithLabelValues(o.Rule.Name()).Add(float64(cost))
	}
}

// reserved records one reservation of o's admission.
func (m *Metrics) reserved(front string, o *Outcome, result string) {
	if m == nil {
		return
	}
	m.reservations.WithLabelValues(front, o.Rule.Name(), result).Inc()
}

// released records one release of o's slot.
func (m *Metrics) released(front string, o *Outcome, result string) {
	if m == nil {
		return
	}
	m.releases.WithLabelValues(front, o.Rule.Name(), result).Inc()
}

// LeaseTaken records one lease call (limiter.LeaseOptions.OnLease): the units granted and
// those returned from the previous lease. Labelled by policy only: identities are
// unbounded; ratelimit_sidecar_decisions_total{source="Lease"} against source="Redis"
// shows how much of a policy's traffic leases serve.
func (m *Metrics) LeaseTaken(p *limiter.Policy, granted, returned int64) {
	if m == nil {
		return
	}
	if granted > 0 || returned == 0 {
		m.leaseUnits.WithLabelValues(p.Name).Observe(float64(granted))
	}
	if returned > 0 {
		m.leaseReturned.WithLabelValues(p.Name).Add(float64(returned))
	}
}

// LeaseHeld records a lease held unspent (limiter.LeaseOptions.OnUnacknowledged): its units
// were debited in Redis but not every replica acknowledged them, so none is spent.
func (m *Metrics) LeaseHeld(p *limiter.Policy, units int64, _ error) {
	if m == nil {
		return
	}
	m.leaseHeld.WithLabelValues(p.Name).Add(float64(units))
}

func (m *Metrics) snapshotLoaded(s *Set) {
	if m == nil {
		return
	}
	m.snapshotInfo.Reset()
	m.snapshotInfo.WithLabelValues(s.Namespace, s.Version).Set(1)
	m.snapshotLoads.WithLabelValues("loaded").Inc()
	m.snapshotTime.SetToCurrentTime()
	m.policies.Set(float64(len(s.Rules)))
	m.refused.Set(float64(s.refused))
}

func (m *Metrics) snapshotRefused() {
	if m == nil {
		return
	}
	m.snapshotLoads.WithLabelValues("refused").Inc()
}
