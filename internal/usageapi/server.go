package usageapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
)

// FrontName names the usage API where the engine names its fronts.
const FrontName = "usage"

// Server answers the usage API. Safe for concurrent use.
type Server struct {
	guard   *Guard
	gate    *gate
	engines *engines
	reader  client.Reader
	events  events.EventRecorder
	log     logr.Logger
	mux     *http.ServeMux
}

// NewServer serves usage reads and changes: guard decides who may, reader reads the
// namespaces' snapshot ConfigMaps and policies, lims read and change each namespace's
// Redis, rec records each change as an Event on its policy (nil: none).
func NewServer(guard *Guard, reader client.Reader, lims *Limiters, rec events.EventRecorder, log logr.Logger) *Server {
	s := &Server{guard: guard, gate: newGate(time.Now), engines: &engines{reader: reader, limiters: lims}, reader: reader,
		events: rec, log: log, mux: http.NewServeMux()}
	for _, prefix := range []string{LegacyPrefix, AggregatedPrefix} {
		s.mux.HandleFunc("GET "+prefix+UsageRoute, s.usage)
		s.mux.HandleFunc("GET "+prefix+TopRoute, s.top)
		s.mux.HandleFunc("POST "+prefix+AdjustRoute, s.adjust)
	}
	s.discovery()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// usage answers one usage read: authorized first, so that another namespace's policies are
// refused alike whether they exist or not.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.open(w, r, "get")
	if !ok {
		return
	}
	act, who, g := sc.act, sc.who, sc.engine
	req, err := readQuery(act.Policy, r.URL.Query())
	if err != nil {
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	rule, c, status, err := checkwire.CheckOf(sc.set, &req)
	if err != nil {
		jsonreply.Error(w, status, err.Error())
		return
	}
	o := g.Decide(r.Context(), FrontName, rule, c)
	// Every read is logged (who, which policy, the answer), never the identity: an audit trail.
	s.log.Info("usage read", "user", who.GetName(), "namespace", act.Namespace, "policy", act.Policy,
		"result", o.Result(), "source", string(o.Decision.Source))
	if o.Decision.WithoutRedis() {
		jsonreply.Error(w, http.StatusServiceUnavailable, fmt.Sprintf("redis could not be asked: %v", o.Decision.Err))
		return
	}
	status = http.StatusOK
	if !o.Allowed {
		status = http.StatusTooManyRequests
	}
	jsonreply.Write(w, status, checkwire.ResponseOf(&o, sc.set.Version))
}

// scope is one request's authorized view: who asks for what, and the namespace's engine on
// its published snapshot.
type scope struct {
	act    Action
	who    user.Info
	engine *engine.Engine
	set    *engine.Set
}

// open authorizes verb on the request's policy first (so that another namespace's policies
// are refused alike whether they exist or not), then loads its namespace's snapshot. On a
// refusal it has answered w and reports false.
func (s *Server) open(w http.ResponseWriter, r *http.Request, verb string) (scope, bool) {
	sc := scope{act: Action{Verb: verb, Namespace: r.PathValue("namespace"), Policy: r.PathValue("policy")}}
	var err error
	if sc.who, err = s.guard.Check(r, sc.act); err != nil {
		s.refuse(w, err)
		return sc, false
	}
	if sc.engine, err = s.engines.forNamespace(r.Context(), sc.act.Namespace); err != nil {
		s.refuse(w, err)
		return sc, false
	}
	if sc.set, err = sc.engine.Snapshot(); err != nil {
		s.refuse(w, err)
		return sc, false
	}
	return sc, true
}

// refuse answers an error: the guard's refusal as it says, no snapshot 404, else 503 (the
// Kubernetes API or the snapshot could not be read).
func (s *Server) refuse(w http.ResponseWriter, err error) {
	var denied *Denied
	switch {
	case errors.As(err, &denied):
		jsonreply.Error(w, denied.Status, denied.Reason)
	case errors.Is(err, ErrNoSnapshot):
		jsonreply.Error(w, http.StatusNotFound, err.Error())
	default:
		s.log.Error(err, "usage read failed")
		jsonreply.Error(w, http.StatusServiceUnavailable, err.Error())
	}
}

// readQuery is the peek a usage read states: identity or its parts, tier, cost.
func readQuery(policy string, q url.Values) (checkwire.Request, error) {
	req := checkwire.Request{Policy: policy, Identity: q.Get("identity"), Parts: q["part"], Tier: q.Get("tier"), Peek: true}
	for name := range q {
		switch name {
		case "identity", "part", "tier", "cost":
		default:
			return req, fmt.Errorf("%s: unknown parameter (identity, part, tier and cost are read)", name)
		}
	}
	if c := q.Get("cost"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			return req, fmt.Errorf("cost: %q is not a whole number of at least 0", c)
		}
		req.Cost = n
	}
	if req.Identity != "" && len(req.Parts) > 0 {
		return req, errors.New("identity: state the identity or its parts, not both")
	}
	return req, nil
}
