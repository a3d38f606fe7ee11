package backend

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Default is the name the manager's default Redis goes by where a backend's name is
// expected: no RedisBackend can be named "" (the API server requires a name).
const Default = ""

// ErrEmptySelector is the selector problem of a backend whose namespaceSelector is empty:
// it would select every namespace, so it selects none.
var ErrEmptySelector = errors.New("the namespaceSelector is empty: it selects no namespace")

// Selector is b's namespaceSelector as a labels.Selector, or why it selects nothing: it is
// empty (ErrEmptySelector; the CRD refuses one, this guards an object stored without that
// rule) or it cannot be read (an unknown operator, a bad value).
func Selector(b *v1alpha1.RedisBackend) (labels.Selector, error) {
	s := &b.Spec.NamespaceSelector
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return nil, ErrEmptySelector
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	return sel, nil
}

// Selects reports whether b selects a namespace with labels nsLabels. A backend being
// deleted, or whose selector is empty or unreadable, selects nothing.
func Selects(b *v1alpha1.RedisBackend, nsLabels map[string]string) bool {
	if !b.DeletionTimestamp.IsZero() {
		return false
	}
	sel, err := Selector(b)
	return err == nil && sel.Matches(labels.Set(nsLabels))
}

// Serving is the name of the backend that serves a namespace with labels nsLabels: of the
// backends selecting it, the one whose name sorts first; Default when none does.
func Serving(backends []v1alpha1.RedisBackend, nsLabels map[string]string) string {
	best := Default
	for i := range backends {
		b := &backends[i]
		if (best == Default || b.Name < best) && Selects(b, nsLabels) {
			best = b.Name
		}
	}
	return best
}

// Namespace is a namespace's name and labels, what selection reads of it.
type Namespace struct {
	// Name is the namespace's name.
	Name string
	// Labels are its labels.
	Labels map[string]string
}

// Conflict is a namespace a backend selects that another serves.
type Conflict struct {
	// Namespace is the namespace both select.
	Namespace string
	// ServedBy is the backend that serves it (its name sorts first).
	ServedBy string
}

// Claims are what one backend's selector amounts to over the namespaces.
type Claims struct {
	// Serves are the namespaces the backend serves, sorted.
	Serves []string
	// Conflicts are the namespaces it selects that another backend serves, sorted by
	// namespace.
	Conflicts []Conflict
}

// ClaimsOf are the claims of the backend named name among backends over namespaces.
func ClaimsOf(name string, backends []v1alpha1.RedisBackend, namespaces []Namespace) Claims {
	i := slices.IndexFunc(backends, func(b v1alpha1.RedisBackend) bool { return b.Name == name })
	if i < 0 {
		return Claims{}
	}
	self := &backends[i]
	var c Claims
	for _, ns := range namespaces {
		if !Selects(self, ns.Labels) {
			continue
		}
		if by := Serving(backends, ns.Labels); by == name {
			c.Serves = append(c.Serves, ns.Name)
		} else {
			c.Conflicts = append(c.Conflicts, Conflict{Namespace: ns.Name, ServedBy: by})
		}
	}
	slices.Sort(c.Serves)
	slices.SortFunc(c.Conflicts, func(a, b Conflict) int { return strings.Compare(a.Namespace, b.Namespace) })
	return c
}

// Describe names a Redis for people: "RedisBackend <name>", or "the default Redis".
func Describe(name string) string {
	if name == Default {
		return "the default Redis"
	}
	return "RedisBackend " + name
}
