package tenancy

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
)

// Repairer checks every Redis node's users every Resync, as the script loader checks
// scripts: a node restarted without an aclfile gets the namespaces' users back with their
// current passwords, and a managed user nobody asked for (its namespace lost its policies
// while no manager ran, or a node missed a deletion) sends its namespace to the
// Reconciler, which decides from the API whether it stays. A manager Runnable; leader
// only, like the reconciler whose wanted users it repairs.
type Repairer struct {
	// Users are the reconciler's users.
	Users *redisacl.Users
	// UserPrefix begins each managed user name; the rest is the namespace.
	UserPrefix string
	// Resync is how often the nodes are checked. Default 10s.
	Resync time.Duration
	// Unknown receives the namespace of each managed user found unasked.
	Unknown chan<- event.GenericEvent
	// Log receives repairs and failures.
	Log logr.Logger
	// OnRound, when set, is told the outcome of each round (a RedisBackend's UsersReady).
	OnRound func(res redisacl.RepairResult, err error)
}

// Start implements manager.Runnable: a repair round every Resync until ctx ends.
func (p *Repairer) Start(ctx context.Context) error {
	resync := p.Resync
	if resync <= 0 {
		resync = 10 * time.Second
	}
	wait.NonSlidingUntilWithContext(ctx, p.round, resync)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (p *Repairer) NeedLeaderElection() bool { return true }

// round repairs every node once and reports what it found.
func (p *Repairer) round(ctx context.Context) {
	res, err := p.Users.Repair(ctx)
	if p.OnRound != nil {
		p.OnRound(res, err)
	}
	if res.Applied > 0 {
		tenantRepairs.Add(float64(res.Applied))
		p.Log.Info("redis users set again on nodes that had lost them", "users", res.Applied)
	}
	if err != nil {
		tenantFailures.Inc()
		p.Log.Info("redis users not checked on every node; will retry", "error", err.Error())
	}
	for _, name := range res.Unknown {
		ns := strings.TrimPrefix(name, p.UserPrefix)
		if len(validation.IsDNS1123Label(ns)) > 0 {
			p.Log.V(1).Info("managed redis user names no namespace; left alone", "user", name)
			continue
		}
		select {
		case p.Unknown <- event.GenericEvent{Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}}:
		case <-ctx.Done():
			return
		}
	}
}
