package usageapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/eventnote"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/internal/usage"
)

// AdjustVerb is the RBAC verb on ratelimitpolicies/usage that a reset, refund or grant needs.
const AdjustVerb = "update"

// maxAdjustBody bounds an adjustment's body.
const maxAdjustBody = 64 << 10

// adjust answers one reset, refund or grant: authorized first (verb update on the policy's
// usage), then applied on the namespace's published snapshot as a check would count, then
// recorded as an Event on the policy and in the log, naming who, the caller by hash, and how
// much.
func (s *Server) adjust(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.open(w, r, AdjustVerb)
	if !ok {
		return
	}
	act, who, g := sc.act, sc.who, sc.engine
	op := limiter.Op(r.PathValue("op"))
	body, err := readAdjust(r.Body)
	if err != nil {
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	a := limiter.Adjustment{Op: op, Amount: body.Amount, RequestID: body.RequestID}
	if err := a.Validate(); err != nil {
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	req := checkwire.Request{Policy: act.Policy, Identity: body.Identity, Parts: body.Parts, Tier: body.Tier}
	rule, c, status, err := checkwire.CheckOf(sc.set, &req)
	if err != nil {
		jsonreply.Error(w, status, err.Error())
		return
	}
	tier, out, err := g.Adjust(r.Context(), rule, c, a)
	if err != nil {
		s.adjustFailed(w, act, err)
		return
	}
	ans := answerOf(act.Policy, c.Identity, tier, op, out)
	s.record(r, who, act, &ans, body.RequestID)
	jsonreply.Write(w, http.StatusOK, ans)
}

// adjustFailed answers an adjustment that did not apply: 400 without an identity, 409 for a
// request id used for another change, else 503 (Redis could not be asked).
func (s *Server) adjustFailed(w http.ResponseWriter, act Action, err error) {
	switch {
	case errors.Is(err, engine.ErrNoIdentity):
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, limiter.ErrAdjustReused):
		jsonreply.Error(w, http.StatusConflict, err.Error())
	default:
		s.log.Error(err, "usage change failed", "namespace", act.Namespace, "policy", act.Policy)
		jsonreply.Error(w, http.StatusServiceUnavailable, fmt.Sprintf("redis could not be asked: %v", err))
	}
}

// readAdjust decodes an adjustment's body: one JSON object of known fields.
func readAdjust(r io.Reader) (usage.AdjustRequest, error) {
	var req usage.AdjustRequest
	data, err := io.ReadAll(io.LimitReader(r, maxAdjustBody+1))
	if err != nil {
		return req, fmt.Errorf("read body: %w", err)
	}
	if len(data) > maxAdjustBody {
		return req, fmt.Errorf("body is larger than %d bytes", maxAdjustBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("body: %w", err)
	}
	if dec.More() {
		return req, errors.New("body: one JSON object, nothing after it")
	}
	if req.Identity != "" && len(req.Parts) > 0 {
		return req, errors.New("identity: state the identity or its parts, not both")
	}
	return req, nil
}

// answerOf is the wire answer to an adjustment of identity's counters of tier.
func answerOf(policy, identity string, tier *engine.Tier, op limiter.Op, out limiter.Adjusted) usage.Adjusted {
	ans := usage.Adjusted{Policy: policy, Op: string(op), IdentityHash: snapshot.IdentityHash(identity),
		Replayed: out.Replayed, Limits: make([]usage.LimitChange, len(out.Limits))}
	if tier.Name != snapshot.DefaultTier {
		ans.Tier = tier.Name
	}
	for i, l := range out.Limits {
		ans.Limits[i] = usage.LimitChange{Name: l.Name, Quota: l.Limit, Remaining: l.Remaining, Applied: l.Applied,
			ResetAfterMs: l.ResetAfter.Milliseconds()}
	}
	return ans
}

// record leaves the change in the log and, unless it was a replay, as an Event on the policy:
// who, what, the caller by hash, how much each limit freed, and the request id. The Event's
// note is free text printed as it is, so every name in it that a client or the namespace's
// snapshot chose (the user, the tier, the limits, the request id) is quoted, and the note is
// kept to one line: no value can write a line that passes for another change.
func (s *Server) record(r *http.Request, who user.Info, act Action, ans *usage.Adjusted, requestID string) {
	var applied, quoted []string
	for _, l := range ans.Limits {
		applied = append(applied, fmt.Sprintf("%s %+d (now %d of %d)", l.Name, l.Applied, l.Remaining, l.Quota))
		quoted = append(quoted, fmt.Sprintf("%q %+d (now %d of %d)", l.Name, l.Applied, l.Remaining, l.Quota))
	}
	s.log.Info("usage changed", "user", who.GetName(), "namespace", act.Namespace, "policy", act.Policy,
		"op", ans.Op, "identityHash", ans.IdentityHash, "tier", ans.Tier, "replayed", ans.Replayed,
		"applied", strings.Join(applied, ", "), "requestId", requestID)
	if ans.Replayed || s.events == nil {
		return
	}
	var pol v1alpha1.RateLimitPolicy
	if err := s.reader.Get(r.Context(), client.ObjectKey{Namespace: act.Namespace, Name: act.Policy}, &pol); err != nil {
		s.log.Error(err, "no event for a usage change: the policy could not be read", "namespace", act.Namespace, "policy", act.Policy)
		return
	}
	note := fmt.Sprintf("%s by %q for caller %s%s: %s (request id %q)", ans.Op, who.GetName(), ans.IdentityHash,
		tierNote(ans.Tier), strings.Join(quoted, ", "), requestID)
	s.events.Eventf(&pol, nil, corev1.EventTypeNormal, reasons[ans.Op], "Usage"+strings.ToUpper(ans.Op[:1])+ans.Op[1:],
		"%s", eventnote.OneLine(note))
}

// reasons are the Events' reasons by op.
var reasons = map[string]string{"reset": "UsageReset", "refund": "UsageRefunded", "grant": "UsageGranted"}

// tierNote names a tier in an Event, quoted, or nothing.
func tierNote(tier string) string {
	if tier == "" {
		return ""
	}
	return fmt.Sprintf(" (tier %q)", tier)
}
