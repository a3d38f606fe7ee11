package lint

import (
	"context"
	"fmt"
	"io/fs"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/ratelimit-dev/ratelimit-operator/config/crd"
)

// kindSchema is one served version of a CustomResourceDefinition, ready for the API server's
// checks of a create.
type kindSchema struct {
	namespaced bool
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// loadSchemas reads every CustomResourceDefinition in crd.Bases, by group, version and kind.
func loadSchemas() (map[schema.GroupVersionKind]*kindSchema, error) {
	out := map[schema.GroupVersionKind]*kindSchema{}
	err := fs.WalkDir(crd.Bases, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := crd.Bases.ReadFile(path)
		if err != nil {
			return err
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &def); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, v := range def.Spec.Versions {
			if !v.Served || v.Schema == nil {
				continue
			}
			ks, err := newKindSchema(v.Schema.OpenAPIV3Schema, def.Spec.Scope == apiextensionsv1.NamespaceScoped)
			if err != nil {
				return fmt.Errorf("%s version %s: %w", path, v.Name, err)
			}
			out[schema.GroupVersionKind{Group: def.Spec.Group, Version: v.Name, Kind: def.Spec.Names.Kind}] = ks
		}
		return nil
	})
	return out, err
}

// newKindSchema builds the validators the API server builds for one version's schema.
func newKindSchema(v1 *apiextensionsv1.JSONSchemaProps, namespaced bool) (*kindSchema, error) {
	var internal apiextensionsinternal.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, &internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	return &kindSchema{namespaced: namespaced, structural: structural, validator: validator,
		cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}, nil
}

// prune drops the fields obj's schema does not declare, as the API server does, and reports
// each: under kubectl's default (--validate=strict) the server refuses them.
func (k *kindSchema) prune(obj map[string]any) field.ErrorList {
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	var errs field.ErrorList
	for _, path := range pruning.PruneWithOptions(obj, k.structural, true, opts) {
		errs = append(errs, field.Forbidden(field.NewPath(path),
			"unknown field: not in the schema (the API server refuses it under strict field validation, kubectl's default)"))
	}
	return errs
}

// applyDefaults sets the schema's defaults in obj, as the API server does before admission.
func (k *kindSchema) applyDefaults(obj map[string]any) { defaulting.Default(obj, k.structural) }

// validate runs the API server's checks of a create: the OpenAPI schema and list types,
// then the CEL rules (x-kubernetes-validations), which, as there, are skipped with a note
// when an error leaves the object unfit for them.
func (k *kindSchema) validate(ctx context.Context, obj map[string]any) field.ErrorList {
	errs := apiservervalidation.ValidateCustomResource(nil, obj, k.validator)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, k.structural, obj)...)
	if blocked := blockingError(errs); blocked != nil {
		return append(errs, blocked)
	}
	celErrs, _ := k.cel.Validate(ctx, nil, k.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// blockingError is the API server's note that the CEL rules were not run, when errs holds
// an error of a kind that stops them (as its customResourceStrategy decides), else nil.
func blockingError(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
			field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; "+
				"correct the existing errors to complete validation")
		}
	}
	return nil
}
