// Package health_test judges RateLimitPolicies as GitOps tools do: kstatus
// (sigs.k8s.io/cli-utils, which Flux, kpt and the cli-utils applier use) and the Argo CD
// health Lua this repository ships (config/argocd/ratelimitpolicy-health.lua), run as Argo CD
// runs it. The objects are real: read from a kube-apiserver (envtest) after the operator's
// controllers, running in-process against a real redis-server, wrote their status. No
// webhook runs, so a policy the webhook would refuse can be stored and the controller must
// report it.
package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/operator"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// resync is the script loader's period in every manager of this suite.
const resync = 500 * time.Millisecond

// timeout bounds every wait for the controller to act.
const timeout = 20 * time.Second

// healthScript is the Argo CD health check, relative to the repository's root.
const healthScript = "config/argocd/ratelimitpolicy-health.lua"

var suite = kube.Suite{Name: "health suite"}

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	os.Exit(suite.Run(m))
}

// world is one test's control plane, redis-server and namespace.
type world struct {
	e     *kube.Env
	redis *redistest.Server
	ns    string
}

// newWorld gives the test its own redis-server and namespace; the manager starts with start.
func newWorld(t *testing.T) *world {
	t.Helper()
	e := suite.Env(t)
	return &world{e: e, redis: redistest.StartServer(t), ns: kube.NewNamespace(t, e, "h-")}
}

// start runs the operator's controllers against the world's Redis, watching its namespace
// only; the manager stops when the test ends, or earlier by Stop.
func (w *world) start(t *testing.T) *operator.Manager {
	t.Helper()
	return operator.StartT(t, w.e.Config, w.redis.Client(), operator.StandaloneTopology(w.redis.Addr()), resync, w.ns)
}

func (w *world) create(t *testing.T, p *v1alpha1.RateLimitPolicy) {
	t.Helper()
	if err := w.e.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("create %s: %v", p.Name, err)
	}
}

func (w *world) policy(t *testing.T, name string) *v1alpha1.RateLimitPolicy {
	t.Helper()
	var p v1alpha1.RateLimitPolicy
	if err := w.e.Client.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// update reads the policy, applies change and writes it back.
func (w *world) update(t *testing.T, name string, change func(*v1alpha1.RateLimitPolicy)) {
	t.Helper()
	p := w.policy(t, name)
	change(p)
	if err := w.e.Client.Update(context.Background(), p); err != nil {
		t.Fatalf("update %s: %v", name, err)
	}
}

// health is a policy as the API server returns it, judged by kstatus and by the Argo CD Lua.
type health struct {
	obj      *unstructured.Unstructured
	policy   *v1alpha1.RateLimitPolicy // obj, typed: checks read the very object judged
	kstatus  *status.Result
	argo     string
	argoText string
}

func (h health) String() string {
	return fmt.Sprintf("kstatus %s (%s), Argo CD %s (%s); conditions %s", h.kstatus.Status, h.kstatus.Message,
		h.argo, h.argoText, conditionsOf(h.obj))
}

// judge reads the policy from the API server (unstructured, as GitOps tools read it) and
// computes both verdicts.
func (w *world) judge(t testing.TB, name string) (health, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("RateLimitPolicy"))
	if err := w.e.Client.Get(context.Background(), types.NamespacedName{Namespace: w.ns, Name: name}, u); err != nil {
		return health{}, err
	}
	return judgeObject(t, u), nil
}

// judgeObject computes both verdicts on one object.
func judgeObject(t testing.TB, u *unstructured.Unstructured) health {
	t.Helper()
	res, err := status.Compute(u)
	if err != nil {
		t.Fatalf("kstatus: %v", err)
	}
	argo, text := argoHealth(t, u.Object)
	var p v1alpha1.RateLimitPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		t.Fatalf("convert %s: %v", u.GetName(), err)
	}
	return health{obj: u, policy: &p, kstatus: res, argo: argo, argoText: text}
}

// expect says whether h has both verdicts.
func (h health) expect(k status.Status, argo string) error {
	if h.kstatus.Status != k || h.argo != argo {
		return fmt.Errorf("%s; want kstatus %s, Argo CD %s", h, k, argo)
	}
	return nil
}

// now judges the policy once and fails unless both verdicts are as wanted.
func (w *world) now(t *testing.T, name string, k status.Status, argo string) health {
	t.Helper()
	h, err := w.judge(t, name)
	if err == nil {
		err = h.expect(k, argo)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s: %s", name, h)
	return h
}

// until waits for both verdicts on the policy, with check (when given) holding too.
func (w *world) until(t *testing.T, name string, k status.Status, argo string, check func(*v1alpha1.RateLimitPolicy) error) health {
	t.Helper()
	var h health
	wait.Eventually(t, timeout, fmt.Sprintf("%s: kstatus %s, Argo CD %s", name, k, argo), func() error {
		var err error
		if h, err = w.judge(t, name); err != nil {
			return err
		}
		if err := h.expect(k, argo); err != nil {
			return err
		}
		if check != nil {
			return check(h.policy)
		}
		return nil
	})
	t.Logf("%s: %s", name, h)
	return h
}

// hasCondition checks one condition of p, for p's current generation.
func hasCondition(p *v1alpha1.RateLimitPolicy, typ string, s metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	if c == nil || c.Status != s || c.Reason != reason || c.ObservedGeneration != p.Generation {
		return fmt.Errorf("%s: condition %s %+v, want %s/%s for generation %d", p.Name, typ, c, s, reason, p.Generation)
	}
	return nil
}

// allConditionsCurrent checks that status.observedGeneration and every condition's
// observedGeneration are p's generation (what kstatus and the Lua rely on).
func allConditionsCurrent(p *v1alpha1.RateLimitPolicy) error {
	if p.Status.ObservedGeneration != p.Generation {
		return fmt.Errorf("%s: observedGeneration %d, generation %d", p.Name, p.Status.ObservedGeneration, p.Generation)
	}
	for _, c := range p.Status.Conditions {
		if c.ObservedGeneration != p.Generation {
			return fmt.Errorf("%s: condition %s for generation %d, generation %d", p.Name, c.Type, c.ObservedGeneration, p.Generation)
		}
	}
	return nil
}

func conditionsOf(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v/%v@%v", m["type"], m["status"], m["reason"], m["observedGeneration"]))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// argoStatuses are the health codes Argo CD accepts from a script; any other becomes Unknown.
var argoStatuses = map[string]bool{"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true}

// argoHealth runs the shipped health script as Argo CD runs an argocd-cm health script:
// gopher-lua with the standard libraries closed but package, base and table (Argo CD adds a
// reduced os library, which the script does not use, so it is left out here: a call to it
// would fail this test), a one-second deadline, the object as the global obj (maps as
// tables, lists as sequences, numbers as Lua numbers), and the returned table's status and
// message read back.
func argoHealth(t testing.TB, obj map[string]any) (healthStatus, message string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(kube.RepoRoot(), filepath.FromSlash(healthScript)))
	if err != nil {
		t.Fatal(err)
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			t.Fatalf("open Lua library %s: %v", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(string(script)); err != nil {
		t.Fatalf("%s: %v", healthScript, err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("%s returned %s, want a table", healthScript, l.Get(-1).Type())
	}
	st, ok := ret.RawGetString("status").(lua.LString)
	if !ok || !argoStatuses[string(st)] {
		t.Fatalf("%s returned status %v, which Argo CD turns into Unknown", healthScript, ret.RawGetString("status"))
	}
	if msg, ok := ret.RawGetString("message").(lua.LString); ok {
		message = string(msg)
	}
	return string(st), message
}

// toLua converts a decoded JSON value (as an unstructured object holds it) into Lua.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case json.Number:
		return lua.LString(v)
	case []any:
		tbl := l.CreateTable(len(v), 0)
		for _, item := range v {
			tbl.Append(toLua(l, item))
		}
		return tbl
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for k, item := range v {
			tbl.RawSetString(k, toLua(l, item))
		}
		return tbl
	}
	return lua.LNil
}
