package source_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/source"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	kubetest "github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// TestWatchSource runs every ConfigMap source case against one real kube-apiserver + etcd
// (envtest), started here rather than in a TestMain so the package's other tests do not pay
// for it. It skips without the envtest binaries (fails under CI=true).
func TestWatchSource(t *testing.T) {
	env, err := kubetest.Start()
	e := kubetest.Require(t, env, err)
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("CreateUpdateDeleteRecreate", func(t *testing.T) { srcWatchLifecycle(t, e, cs) })
	t.Run("OtherNameIgnored", func(t *testing.T) { srcWatchOtherName(t, e, cs) })
	t.Run("BadUpdatesRefused", func(t *testing.T) { srcWatchBadUpdates(t, e, cs) })
	t.Run("NamespaceRoleSuffices", func(t *testing.T) { srcWatchRBAC(t, e, cs) })
}

// srcWatch runs a ConfigMap source on the default ConfigMap name of ns until the test ends.
func srcWatch(t *testing.T, cs kubernetes.Interface, ns string) (*srcParseSink, *srcErrors, *srcLogs) {
	t.Helper()
	sink, errs := &srcParseSink{}, &srcErrors{}
	log, logs := srcLogger(t)
	src := &source.ConfigMap{Client: cs, Namespace: ns, Sink: sink, Log: log, OnError: errs.record}
	srcRun(t, src.Run)
	return sink, errs, logs
}

func srcConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func srcCreate(t *testing.T, cs kubernetes.Interface, cm *corev1.ConfigMap) {
	t.Helper()
	if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap %s: %v", cm.Name, err)
	}
}

// srcUpdate changes the snapshot ConfigMap of ns with edit.
func srcUpdate(t *testing.T, cs kubernetes.Interface, ns string, edit func(*corev1.ConfigMap)) {
	t.Helper()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, snapshot.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap: %v", err)
	}
	edit(cm)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update configmap: %v", err)
	}
}

func srcSetDoc(doc []byte) func(*corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) { cm.Data = map[string]string{snapshot.DataKey: string(doc)} }
}

func srcWatchLifecycle(t *testing.T, e *kubetest.Env, cs kubernetes.Interface) {
	ns := kubetest.NewNamespace(t, e, "sc-")
	sink, errs, logs := srcWatch(t, cs, ns)
	srcEventually(t, "informer synced", func() bool { return logs.count("watching snapshot configmap") == 1 })
	srcEventually(t, "the absent ConfigMap clears the sink", func() bool { return sink.clearCount() == 1 })

	v1, ver1 := srcDoc(t, 10)
	srcCreate(t, cs, srcConfigMap(ns, snapshot.ConfigMapName, map[string]string{snapshot.DataKey: string(v1)}))
	srcWaitLoaded(t, sink, 1, ver1)

	v2, ver2 := srcDoc(t, 20)
	srcUpdate(t, cs, ns, srcSetDoc(v2))
	srcWaitLoaded(t, sink, 2, ver2)

	// An update that leaves the document alone is not handed over (it would be Load call 3).
	srcUpdate(t, cs, ns, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"touched": "yes"} })
	v3, ver3 := srcDoc(t, 30)
	srcUpdate(t, cs, ns, srcSetDoc(v3))
	srcWaitLoaded(t, sink, 3, ver3)

	// Deleted (the controller does so with the namespace's last policy): no policy applies.
	if err := cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), snapshot.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	srcEventually(t, "the deletion logged", func() bool { return logs.count("snapshot configmap deleted") == 1 })
	srcEventually(t, "the deletion clears the sink", func() bool { return sink.clearCount() == 2 })
	if n, v := sink.state(); n != 3 || v != "" {
		t.Fatalf("after delete: %d Load calls, version %q; want 3 and none", n, v)
	}

	srcCreate(t, cs, srcConfigMap(ns, snapshot.ConfigMapName, map[string]string{snapshot.DataKey: string(v1)}))
	srcWaitLoaded(t, sink, 4, ver1)
	if n := errs.count(); n != 0 {
		t.Errorf("OnError called %d times (last: %v), want 0", n, errs.last())
	}
}

func srcWatchOtherName(t *testing.T, e *kubetest.Env, cs kubernetes.Interface) {
	ns := kubetest.NewNamespace(t, e, "sc-")
	// The ConfigMap exists before the source starts: the initial list loads it.
	v1, ver1 := srcDoc(t, 10)
	srcCreate(t, cs, srcConfigMap(ns, snapshot.ConfigMapName, map[string]string{snapshot.DataKey: string(v1)}))
	sink, errs, _ := srcWatch(t, cs, ns)
	srcWaitLoaded(t, sink, 1, ver1)

	// Another ConfigMap of the namespace, holding a valid snapshot, is never seen: had it
	// been, it would have come before v3 and made v3 the 3rd Load call.
	v2, _ := srcDoc(t, 20)
	srcCreate(t, cs, srcConfigMap(ns, snapshot.ConfigMapName+"-other", map[string]string{snapshot.DataKey: string(v2)}))
	v3, ver3 := srcDoc(t, 30)
	srcUpdate(t, cs, ns, srcSetDoc(v3))
	srcWaitLoaded(t, sink, 2, ver3)
	if n := errs.count(); n != 0 {
		t.Errorf("OnError called %d times (last: %v), want 0", n, errs.last())
	}
}

func srcWatchBadUpdates(t *testing.T, e *kubetest.Env, cs kubernetes.Interface) {
	ns := kubetest.NewNamespace(t, e, "sc-")
	sink, errs, _ := srcWatch(t, cs, ns)
	v1, ver1 := srcDoc(t, 10)
	srcCreate(t, cs, srcConfigMap(ns, snapshot.ConfigMapName, map[string]string{snapshot.DataKey: string(v1)}))
	srcWaitLoaded(t, sink, 1, ver1)

	// Truncated: the sink refuses it and keeps v1; OnError hears of it.
	v2, _ := srcDoc(t, 20)
	srcUpdate(t, cs, ns, srcSetDoc(v2[:len(v2)/2]))
	srcEventually(t, "OnError for the truncated snapshot", func() bool { return errs.count() == 1 })
	if n, v := sink.state(); n != 2 || v != ver1 {
		t.Fatalf("after truncated update: %d Load calls, version %s; want 2, %s", n, v, ver1)
	}

	// No snapshot.json key: refused before the sink.
	srcUpdate(t, cs, ns, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"other.json": string(v1)} })
	srcEventually(t, "OnError for the key-less configmap", func() bool { return errs.count() == 2 })
	if err := errs.last(); !strings.Contains(err.Error(), snapshot.DataKey) {
		t.Errorf("key-less configmap error %q does not name the key", err)
	}
	if n, v := sink.state(); n != 2 || v != ver1 {
		t.Fatalf("after key-less update: %d Load calls, version %s; want 2, %s", n, v, ver1)
	}

	v3, ver3 := srcDoc(t, 30)
	srcUpdate(t, cs, ns, srcSetDoc(v3))
	srcWaitLoaded(t, sink, 3, ver3)
}

// srcWatchRBAC runs the source as a service account: with no permission the list is
// forbidden (reported through OnError); a namespaced Role with get, list and watch on
// configmaps is enough.
func srcWatchRBAC(t *testing.T, e *kubetest.Env, admin kubernetes.Interface) {
	ctx := context.Background()
	ns := kubetest.NewNamespace(t, e, "sc-")
	v1, ver1 := srcDoc(t, 10)
	srcCreate(t, admin, srcConfigMap(ns, snapshot.ConfigMapName, map[string]string{snapshot.DataKey: string(v1)}))

	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":sidecar"}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink, errs, _ := srcWatch(t, cs, ns)
	srcEventually(t, "OnError for the forbidden list", func() bool { return errs.count() > 0 })
	if err := errs.last(); !apierrors.IsForbidden(err) {
		t.Fatalf("watch error %v, want a wrapped Forbidden", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sidecar"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sidecar"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sidecar"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "sidecar"}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srcWaitLoaded(t, sink, 1, ver1)
}

func TestWatchSourceRequiresClientNamespaceSink(t *testing.T) {
	ctx := context.Background()
	for name, src := range map[string]*source.ConfigMap{
		"no client":    {Namespace: "shop", Sink: &srcParseSink{}},
		"no namespace": {Client: &kubernetes.Clientset{}, Sink: &srcParseSink{}},
		"no sink":      {Client: &kubernetes.Clientset{}, Namespace: "shop"},
	} {
		if err := src.Run(ctx); err == nil {
			t.Errorf("%s: Run returned nil", name)
		}
	}
}
