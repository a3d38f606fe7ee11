package lint

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// Result is what the cluster would say of one document.
type Result struct {
	// Source names the document: its file and its place in the file ("p.yaml#2").
	Source string
	// Kind, Namespace and Name name the object (Namespace as it would be created: the
	// document's, else the Linter's).
	Kind, Namespace, Name string
	// Errors are why the cluster would refuse it; none means it would be admitted.
	Errors field.ErrorList
	// Warnings are what the webhook would answer with an admission.
	Warnings []string
}

// Linter checks documents with an installation's rules.
type Linter struct {
	// Rules are the installation's settings, as the manager's flags give them (the key
	// prefix).
	Rules policy.Rules
	// Namespace is where a document without metadata.namespace would be created (kubectl's
	// -n, or the context's namespace).
	Namespace string

	schemas map[schema.GroupVersionKind]*kindSchema
}

// New is a Linter for an installation with rules, creating unnamespaced Documents in
// namespace.
func New(rules policy.Rules, namespace string) (*Linter, error) {
	schemas, err := loadSchemas()
	if err != nil {
		return nil, fmt.Errorf("load the CustomResourceDefinitions: %w", err)
	}
	return &Linter{Rules: rules, Namespace: namespace, schemas: schemas}, nil
}

// Document is one YAML or JSON document of a stream, decoded.
type Document struct {
	// Source names it: its stream and its place there ("p.yaml#2").
	Source string
	// GVK is its apiVersion and kind.
	GVK schema.GroupVersionKind
	// Object is its content.
	Object map[string]any
}

// Read splits a YAML (or JSON) stream into documents; source names the stream in results.
// Empty documents are dropped; one that is not an object is an error naming it.
func Read(source string, r io.Reader) ([]Document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []Document
	for i := 1; ; i++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w", source, i, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("%s#%d: %w", source, i, err)
		}
		if len(obj) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &tm); err != nil {
			return nil, fmt.Errorf("%s#%d: apiVersion and kind: %w", source, i, err)
		}
		docs = append(docs, Document{Source: fmt.Sprintf("%s#%d", source, i), GVK: tm.GroupVersionKind(), Object: obj})
	}
}

// Lint checks docs as one apply of them all: each RateLimitPolicy, RateLimitOverride and
// RedisBackend gets a Result; documents of other kinds are left out and counted in skipped.
func (l *Linter) Lint(ctx context.Context, docs []Document) (results []Result, skipped int) {
	policies := map[string]*v1alpha1.RateLimitPolicy{} // admitted ones, by namespace/name
	var overrides []pendingOverride
	for _, d := range docs {
		ks := l.schemas[d.GVK]
		if ks == nil {
			skipped++
			continue
		}
		r, p := l.lintOne(ctx, d, ks)
		if p != nil {
			policies[p.Namespace+"/"+p.Name] = p
		}
		results = append(results, r)
		if d.GVK.Kind == "RateLimitOverride" && len(r.Errors) == 0 {
			overrides = append(overrides, pendingOverride{result: len(results) - 1, doc: d})
		}
	}
	for _, o := range overrides {
		l.fitOverride(&results[o.result], o.doc, policies)
	}
	return results, skipped
}

// pendingOverride is an admitted override, checked against its policy once every document
// is read: its result's index, and its document.
type pendingOverride struct {
	result int
	doc    Document
}

// lintOne is the cluster's admission of one document of a kind this repository defines, and
// the admitted policy when it is one.
func (l *Linter) lintOne(ctx context.Context, d Document, ks *kindSchema) (Result, *v1alpha1.RateLimitPolicy) {
	obj := d.Object
	r := Result{Source: d.Source, Kind: d.GVK.Kind}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	if ks.namespaced && meta["namespace"] == nil {
		meta["namespace"] = l.Namespace
	}
	r.Name, _ = meta["name"].(string)
	r.Namespace, _ = meta["namespace"].(string)
	if r.Errors = checkName(r.Name); len(r.Errors) > 0 {
		return r, nil
	}
	if r.Errors = ks.prune(obj); len(r.Errors) > 0 {
		return r, nil
	}
	ks.applyDefaults(obj)
	if d.GVK.Kind != "RateLimitPolicy" {
		r.Errors = ks.validate(ctx, obj)
		return r, nil
	}
	p, errs := l.admitPolicy(ctx, obj, ks)
	r.Errors = errs
	if p != nil {
		r.Warnings = policy.Warnings(nil, p)
	}
	return r, p
}

// checkName is the API server's check of metadata.name for a create by apply.
func checkName(name string) field.ErrorList {
	path := field.NewPath("metadata", "name")
	if name == "" {
		return field.ErrorList{field.Required(path, "name or generateName is required")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// admitPolicy runs a policy through admission in the cluster's order: the durations guard
// and the defaulting webhook, the schema and CEL rules, then the validating webhook. It
// returns the defaulted policy when admitted.
func (l *Linter) admitPolicy(ctx context.Context, obj map[string]any, ks *kindSchema) (*v1alpha1.RateLimitPolicy, field.ErrorList) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	if errs := policy.CheckDecodable(raw, &v1alpha1.RateLimitPolicy{}); len(errs) > 0 {
		return nil, errs
	}
	var p v1alpha1.RateLimitPolicy
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	l.Rules.Default(&p)
	defaulted, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	delete(defaulted, "status")
	if errs := ks.validate(ctx, defaulted); len(errs) > 0 {
		return nil, errs
	}
	if errs := l.Rules.Validate(&p); len(errs) > 0 {
		return nil, errs
	}
	return &p, nil
}

// fitOverride checks an admitted override against its policy when the policy is among the
// documents, as the controller does before publishing it; otherwise it says it could not.
func (l *Linter) fitOverride(r *Result, d Document, policies map[string]*v1alpha1.RateLimitPolicy) {
	var o v1alpha1.RateLimitOverride
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, &o); err != nil {
		r.Errors = append(r.Errors, field.InternalError(nil, err))
		return
	}
	p := policies[o.Namespace+"/"+o.Spec.PolicyName]
	if p == nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("policy %q is not among the files (or was refused): "+
			"the override's fit to it (tiers, callers, limits) is not checked", o.Spec.PolicyName))
		return
	}
	if _, errs := policy.Override(policy.Entry(p), o.Namespace, &o); len(errs) > 0 {
		r.Errors = append(r.Errors, errs...)
	}
}
