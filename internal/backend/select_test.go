package backend

import (
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// backendOf is a backend named name selecting namespaces by sel.
func backendOf(name string, sel metav1.LabelSelector) v1alpha1.RedisBackend {
	return v1alpha1.RedisBackend{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RedisBackendSpec{Addrs: []string{name + ":6379"}, NamespaceSelector: sel}}
}

func labelled(kv ...string) metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return metav1.LabelSelector{MatchLabels: m}
}

// TestServing: a namespace goes to the selecting backend whose name sorts first, whatever
// the order of the list; to the default Redis when none selects it; an empty, unreadable
// or deleted backend's selector selects nothing.
func TestServing(t *testing.T) {
	deleted := backendOf("a-deleted", labelled("tier", "hostile"))
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	backends := []v1alpha1.RedisBackend{
		backendOf("zeta", labelled("tier", "hostile")),
		backendOf("beta", labelled("tier", "hostile", "team", "red")),
		backendOf("alpha", metav1.LabelSelector{}), // empty: selects nothing, not everything
		backendOf("a-bad", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}),
		deleted,
		backendOf("gamma", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "noisy", Operator: metav1.LabelSelectorOpExists}}}),
	}
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, Default},
		{map[string]string{"tier": "trusted"}, Default},
		{map[string]string{"tier": "hostile"}, "zeta"},
		{map[string]string{"tier": "hostile", "team": "red"}, "beta"}, // beta < zeta
		{map[string]string{"noisy": ""}, "gamma"},
		{map[string]string{"noisy": "", "tier": "hostile"}, "gamma"}, // gamma < zeta
	} {
		for _, order := range [][]v1alpha1.RedisBackend{backends, reversed(backends)} {
			if got := Serving(order, c.labels); got != c.want {
				t.Errorf("labels %v: served by %q, want %q", c.labels, got, c.want)
			}
		}
	}
}

func reversed(in []v1alpha1.RedisBackend) []v1alpha1.RedisBackend {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

// TestClaimsOf: each backend serves what it wins and reports a conflict, naming the
// winner, for each namespace it selects that another serves; the winner reports none.
func TestClaimsOf(t *testing.T) {
	backends := []v1alpha1.RedisBackend{
		backendOf("b-isolated", labelled("tier", "hostile")),
		backendOf("a-noisy", labelled("team", "red")),
	}
	namespaces := []Namespace{
		{Name: "shop", Labels: map[string]string{"tier": "trusted"}},
		{Name: "red-2", Labels: map[string]string{"tier": "hostile", "team": "red"}},
		{Name: "blue", Labels: map[string]string{"tier": "hostile"}},
		{Name: "red-1", Labels: map[string]string{"tier": "hostile", "team": "red"}},
		{Name: "red-only", Labels: map[string]string{"team": "red"}},
	}
	b := ClaimsOf("b-isolated", backends, namespaces)
	if want := []string{"blue"}; !slices.Equal(b.Serves, want) {
		t.Errorf("b-isolated serves %v, want %v", b.Serves, want)
	}
	if want := []Conflict{{"red-1", "a-noisy"}, {"red-2", "a-noisy"}}; !slices.Equal(b.Conflicts, want) {
		t.Errorf("b-isolated conflicts %v, want %v", b.Conflicts, want)
	}
	a := ClaimsOf("a-noisy", backends, namespaces)
	if want := []string{"red-1", "red-2", "red-only"}; !slices.Equal(a.Serves, want) || len(a.Conflicts) > 0 {
		t.Errorf("a-noisy: %+v; want to serve %v without conflict", a, want)
	}
	if c := ClaimsOf("gone", backends, namespaces); len(c.Serves)+len(c.Conflicts) > 0 {
		t.Errorf("a backend not in the list claims %+v", c)
	}
}

// TestSelectorProblems: the backend's selector problem is told, so its status can say why
// it serves nothing.
func TestSelectorProblems(t *testing.T) {
	empty := backendOf("e", metav1.LabelSelector{})
	if _, err := Selector(&empty); !errors.Is(err, ErrEmptySelector) {
		t.Errorf("empty selector: %v, want ErrEmptySelector", err)
	}
	bad := backendOf("b", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}})
	if _, err := Selector(&bad); err == nil {
		t.Error("an unknown operator was accepted")
	}
	good := backendOf("g", labelled("a", "b"))
	if _, err := Selector(&good); err != nil {
		t.Errorf("a plain selector: %v", err)
	}
}

// TestOptions: a spec becomes the redisconn options of its topology, which redisconn
// accepts; TLS settings only when enabled.
func TestOptions(t *testing.T) {
	spec := v1alpha1.RedisBackendSpec{Mode: v1alpha1.RedisModeSentinel, Addrs: []string{"s1:26379", "s2:26379"},
		MasterName: "mymaster", DB: 2, TLS: &v1alpha1.RedisBackendTLS{Enabled: true, ServerName: "redis.internal"}}
	o := Options(spec)
	if o.Mode != "sentinel" || !slices.Equal(o.Addrs, spec.Addrs) || o.MasterName != "mymaster" || o.DB != 2 ||
		!o.TLS.Enabled || o.TLS.ServerName != "redis.internal" {
		t.Fatalf("options %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("redisconn refuses the options: %v", err)
	}
	top := Topology(v1alpha1.RedisBackendSpec{Addrs: []string{"r:6379"}, TLS: &v1alpha1.RedisBackendTLS{ServerName: "x"}})
	if top.Mode != "standalone" || top.TLS {
		t.Fatalf("topology of an unset mode and disabled TLS: %+v", top)
	}
	cluster := Options(v1alpha1.RedisBackendSpec{Mode: v1alpha1.RedisModeCluster, Addrs: []string{"a:1", "b:2", "c:3"}})
	if err := cluster.Validate(); err != nil || cluster.Mode != "cluster" {
		t.Fatalf("cluster options %+v: %v", cluster, err)
	}
}

func TestDescribe(t *testing.T) {
	if Describe(Default) != "the default Redis" || Describe("isolated") != "RedisBackend isolated" {
		t.Errorf("Describe: %q, %q", Describe(Default), Describe("isolated"))
	}
}
