// Command apidocs writes the Markdown API reference of the operator's custom resources
// (docs/api.md) from the Go source of the API types: their doc comments and kubebuilder
// markers. Run it with `make docs`; a test fails when the committed reference is stale.
//
// Usage:
//
//	go run ./hack/apidocs [-path api/v1alpha1] [-out docs/api.md]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Marker names the generator understands, without the leading "+".
const (
	markerRoot        = "kubebuilder:object:root"
	markerResource    = "kubebuilder:resource"
	markerPrintColumn = "kubebuilder:printcolumn"
	markerDefault     = "kubebuilder:default"
	markerType        = "kubebuilder:validation:Type"
	markerEnum        = "kubebuilder:validation:Enum"
	markerXValidation = "kubebuilder:validation:XValidation"
	markerGroupName   = "groupName"
	validationPrefix  = "kubebuilder:validation:"
	itemsPrefix       = "kubebuilder:validation:items:"
)

// argMarkers are the markers whose value is a list of key=value arguments after a colon, as in
// +kubebuilder:validation:XValidation:rule="...",message="...".
var argMarkers = []string{
	itemsPrefix + "XValidation",
	markerXValidation,
	markerResource,
	markerPrintColumn,
}

// numericValidations maps the validation markers that take a plain value to their label.
var numericValidations = map[string]string{
	"Minimum":       "minimum",
	"Maximum":       "maximum",
	"MultipleOf":    "multipleOf",
	"MinLength":     "minLength",
	"MaxLength":     "maxLength",
	"MinItems":      "minItems",
	"MaxItems":      "maxItems",
	"MinProperties": "minProperties",
	"MaxProperties": "maxProperties",
}

// mdEscaper escapes the characters of doc comment prose that Markdown would otherwise read as
// emphasis or HTML. Pipes are escaped separately, only inside tables (see cell).
var mdEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "<", `\<`, ">", `\>`)

// apiPackage is the documentation model of one API group version.
type apiPackage struct {
	// Group is the API group, from the package's +groupName marker; empty when absent.
	Group string
	// Version is the API version, the Go package name.
	Version string
	// Types are the exported types by name.
	Types map[string]*typeDoc
}

// typeKind says how a type is documented.
type typeKind int

const (
	// kindStruct is an object with fields.
	kindStruct typeKind = iota
	// kindEnum is a named scalar with a closed set of values.
	kindEnum
	// kindOther is any other named type.
	kindOther
)

// typeDoc is the documentation of one type. Text fields hold Markdown, pipes unescaped.
type typeDoc struct {
	Name    string
	Kind    typeKind
	Doc     []string // paragraphs of the doc comment, markers stripped
	Markers []marker
	Rules   []string // type-level XValidation messages
	Notes   []string // remarks on embedded types that are not listed as fields
	Fields  []fieldDoc
	// Underlying is the underlying type of a non-struct type, e.g. "string".
	Underlying string
	// Validation is the compact validation summary of a non-struct type.
	Validation string
	Values     []enumValue
}

// fieldDoc is one row of a struct's field table. Text fields hold Markdown, pipes unescaped.
type fieldDoc struct {
	Name        string   // JSON name
	Type        string   // type, linked when it is a local type
	Refs        []string // local types the field's type refers to
	Required    bool
	Default     string
	Description string
	Validation  string
}

// enumValue is one allowed value of an enum type.
type enumValue struct {
	Value string
	Doc   string
}

// marker is one +name=value line of a doc comment.
type marker struct {
	Name  string
	Value string
}

// tagOptions are the parts of a json struct tag the generator looks at.
type tagOptions struct {
	Name      string
	Inline    bool
	OmitEmpty bool
}

// builder turns parsed declarations into typeDocs.
type builder struct {
	fset    *token.FileSet
	imports map[string]map[string]string // file name -> import name -> import path
	specs   map[string]*ast.TypeSpec     // exported local types by name
	group   string
	version string
}

// main parses the flags and runs the generator, exiting non-zero on failure.
func main() {
	dir := flag.String("path", "api/v1alpha1", "directory holding the Go source of the API types")
	out := flag.String("out", "docs/api.md", "Markdown file to write, or - for standard output")
	flag.Parse()
	if err := run(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

// run documents the API types in dir and writes the Markdown to out.
func run(dir, out string) error {
	pkg, err := loadPackage(dir)
	if err != nil {
		return err
	}
	md := render(pkg, filepath.ToSlash(filepath.Clean(dir)))
	if out == "-" {
		if _, err := os.Stdout.Write(md); err != nil {
			return fmt.Errorf("write standard output: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	if err := os.WriteFile(out, md, 0o644); err != nil { //nolint:gosec // the API reference is public
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

// loadPackage parses the Go package in dir and builds its documentation model.
func loadPackage(dir string) (*apiPackage, error) {
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil {
		return nil, err
	}
	dp, err := doc.NewFromFiles(fset, files, "", doc.PreserveAST)
	if err != nil {
		return nil, fmt.Errorf("read package documentation of %s: %w", dir, err)
	}
	_, pkgMarkers := splitComment(dp.Doc)
	b := &builder{
		fset:    fset,
		imports: importsByFile(fset, files),
		specs:   map[string]*ast.TypeSpec{},
		group:   markerValue(pkgMarkers, markerGroupName),
		version: dp.Name,
	}
	for _, t := range dp.Types {
		if spec := typeSpec(t); spec != nil {
			b.specs[t.Name] = spec
		}
	}
	pkg := &apiPackage{Group: b.group, Version: b.version, Types: map[string]*typeDoc{}}
	for _, t := range dp.Types {
		if spec := b.specs[t.Name]; spec != nil {
			pkg.Types[t.Name] = b.buildType(t, spec)
		}
	}
	return pkg, nil
}

// parseDir parses the non-test Go files of dir, with comments, in file name order.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read API source directory: %w", err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse API source: %w", err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	return files, nil
}

// importsByFile maps each file name to the names and paths of its imports.
func importsByFile(fset *token.FileSet, files []*ast.File) map[string]map[string]string {
	byFile := map[string]map[string]string{}
	for _, f := range files {
		names := map[string]string{}
		for _, imp := range f.Imports {
			importPath, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				continue
			}
			name := importPath[strings.LastIndex(importPath, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = importPath
		}
		byFile[fset.Position(f.Package).Filename] = names
	}
	return byFile
}

// typeSpec returns the declaration of t.
func typeSpec(t *doc.Type) *ast.TypeSpec {
	for _, s := range t.Decl.Specs {
		if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == t.Name {
			return ts
		}
	}
	return nil
}

// importsAt returns the imports of the file holding pos.
func (b *builder) importsAt(pos token.Pos) map[string]string {
	return b.imports[b.fset.Position(pos).Filename]
}

// buildType documents one type declaration.
func (b *builder) buildType(t *doc.Type, spec *ast.TypeSpec) *typeDoc {
	paras, markers := splitComment(t.Doc)
	td := &typeDoc{
		Name:    t.Name,
		Doc:     escapeAll(paras),
		Markers: markers,
		Rules:   ruleMessages(markers, markerXValidation),
	}
	if st, ok := spec.Type.(*ast.StructType); ok {
		td.Kind = kindStruct
		td.Fields, td.Notes = b.structFields(t.Name, st, b.importsAt(spec.Pos()))
		return td
	}
	td.Kind = kindOther
	td.Underlying = types.ExprString(spec.Type)
	td.Values = enumValues(t, markers)
	if len(td.Values) > 0 {
		td.Kind = kindEnum
	}
	td.Validation = validations(withoutMarker(markers, markerEnum))
	return td
}

// structFields documents the fields of st, a struct declared as owner, in declaration order.
// The notes remark on embedded types whose fields cannot be listed.
func (b *builder) structFields(owner string, st *ast.StructType, imports map[string]string) ([]fieldDoc, []string) {
	var fields []fieldDoc
	var notes []string
	for _, f := range st.Fields.List {
		fs, ns := b.field(owner, f, imports)
		fields = append(fields, fs...)
		notes = append(notes, ns...)
	}
	return fields, notes
}

// field documents one field declaration, which may declare several names or embed a type.
func (b *builder) field(owner string, f *ast.Field, imports map[string]string) ([]fieldDoc, []string) {
	tag := jsonTag(f)
	if tag.Name == "-" {
		return nil, nil
	}
	if len(f.Names) == 0 {
		return b.embedded(owner, f, tag, imports)
	}
	var fields []fieldDoc
	for _, id := range f.Names {
		if !id.IsExported() {
			continue
		}
		name := tag.Name
		if name == "" {
			name = id.Name
		}
		fields = append(fields, b.newField(name, f, tag, imports))
	}
	return fields, nil
}

// embedded documents an embedded field: a named JSON field, the apiVersion and kind of an
// inlined TypeMeta, the fields of an inlined local struct, or a note for anything else.
func (b *builder) embedded(owner string, f *ast.Field, tag tagOptions, imports map[string]string) ([]fieldDoc, []string) {
	if tag.Name != "" && !tag.Inline {
		return []fieldDoc{b.newField(tag.Name, f, tag, imports)}, nil
	}
	typ := derefType(f.Type)
	if sel, ok := typ.(*ast.SelectorExpr); ok && sel.Sel.Name == "TypeMeta" {
		return b.typeMetaFields(owner), nil
	}
	if id, ok := typ.(*ast.Ident); ok {
		if spec := b.specs[id.Name]; spec != nil {
			if st, ok := spec.Type.(*ast.StructType); ok {
				return b.structFields(owner, st, b.importsAt(spec.Pos()))
			}
		}
	}
	text, _ := b.typeRef(typ, imports)
	return nil, []string{"Also has the fields of " + text + ", inlined."}
}

// typeMetaFields are the apiVersion and kind rows standing for an inlined metav1.TypeMeta.
func (b *builder) typeMetaFields(kind string) []fieldDoc {
	apiVersion := b.version
	if b.group != "" {
		apiVersion = b.group + "/" + b.version
	}
	return []fieldDoc{
		{Name: "apiVersion", Type: "string", Required: true, Description: codeSpan(apiVersion)},
		{Name: "kind", Type: "string", Required: true, Description: codeSpan(kind)},
	}
}

// newField documents the field f under its JSON name.
func (b *builder) newField(name string, f *ast.Field, tag tagOptions, imports map[string]string) fieldDoc {
	paras, markers := splitComment(f.Doc.Text())
	typ, refs := b.typeRef(f.Type, imports)
	if override := markerValue(markers, markerType); override != "" {
		typ = overrideType(override, f.Type)
	}
	def := markerValue(markers, markerDefault)
	if def != "" {
		def = codeSpan(def)
	}
	return fieldDoc{
		Name:        name,
		Type:        typ,
		Refs:        refs,
		Required:    isRequired(markers, tag.OmitEmpty),
		Default:     def,
		Description: mdText(strings.Join(paras, " ")),
		Validation:  validations(markers),
	}
}

// typeRef renders a field type: pointers dereferenced, slices as []T, local types linked to
// their section and types of other packages linked to pkg.go.dev. It also returns the local
// types the expression refers to.
func (b *builder) typeRef(expr ast.Expr, imports map[string]string) (string, []string) {
	switch t := expr.(type) {
	case *ast.StarExpr:
		return b.typeRef(t.X, imports)
	case *ast.ArrayType:
		elem, refs := b.typeRef(t.Elt, imports)
		return "[]" + elem, refs
	case *ast.MapType:
		key, keyRefs := b.typeRef(t.Key, imports)
		val, valRefs := b.typeRef(t.Value, imports)
		return "map[" + key + "]" + val, append(keyRefs, valRefs...)
	case *ast.Ident:
		if b.specs[t.Name] != nil {
			return link(t.Name), []string{t.Name}
		}
		return t.Name, nil
	case *ast.SelectorExpr:
		return externalLink(t, imports), nil
	default:
		return codeSpan(types.ExprString(expr)), nil
	}
}

// externalLink links a type of another package to its pkg.go.dev documentation.
func externalLink(sel *ast.SelectorExpr, imports map[string]string) string {
	pkgName, ok := sel.X.(*ast.Ident)
	if !ok || imports[pkgName.Name] == "" {
		return sel.Sel.Name
	}
	return "[" + sel.Sel.Name + "](https://pkg.go.dev/" + imports[pkgName.Name] + "#" + sel.Sel.Name + ")"
}

// overrideType renders the type a +kubebuilder:validation:Type marker declares, naming the Go
// type it stands for, e.g. "string (duration)" for a metav1.Duration.
func overrideType(override string, expr ast.Expr) string {
	var name string
	switch t := derefType(expr).(type) {
	case *ast.Ident:
		name = t.Name
	case *ast.SelectorExpr:
		name = t.Sel.Name
	}
	if name == "" || strings.EqualFold(name, override) || types.Universe.Lookup(name) != nil {
		return override
	}
	return override + " (" + strings.ToLower(name) + ")"
}

// derefType strips the pointers from a type expression.
func derefType(expr ast.Expr) ast.Expr {
	for {
		star, ok := expr.(*ast.StarExpr)
		if !ok {
			return expr
		}
		expr = star.X
	}
}

// jsonTag reads the json struct tag of f.
func jsonTag(f *ast.Field) tagOptions {
	if f.Tag == nil {
		return tagOptions{}
	}
	raw, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return tagOptions{}
	}
	name, opts, _ := strings.Cut(reflect.StructTag(raw).Get("json"), ",")
	tag := tagOptions{Name: name}
	for opt := range strings.SplitSeq(opts, ",") {
		switch opt {
		case "inline":
			tag.Inline = true
		case "omitempty", "omitzero":
			tag.OmitEmpty = true
		}
	}
	return tag
}

// isRequired applies the first +required or +optional marker, falling back to whether the
// JSON tag omits empty values.
func isRequired(markers []marker, omitEmpty bool) bool {
	for _, m := range markers {
		switch m.Name {
		case "required", "kubebuilder:validation:Required", "k8s:required":
			return true
		case "optional", "kubebuilder:validation:Optional", "k8s:optional":
			return false
		}
	}
	return !omitEmpty
}

// enumValues lists the allowed values of t: those of its Enum marker, or else its typed
// constants, each described by the doc comment of the constant holding it.
func enumValues(t *doc.Type, markers []marker) []enumValue {
	docs := map[string]string{}
	var consts []string
	for _, v := range t.Consts {
		for _, s := range v.Decl.Specs {
			vs, ok := s.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, id := range vs.Names {
				if i >= len(vs.Values) {
					break
				}
				if val, ok := literal(vs.Values[i]); ok {
					consts = append(consts, val)
					docs[val] = constDoc(id.Name, vs.Doc.Text())
				}
			}
		}
	}
	values := consts
	if enum := markerValue(markers, markerEnum); enum != "" {
		values = strings.Split(enum, ";")
	}
	out := make([]enumValue, 0, len(values))
	for _, v := range values {
		out = append(out, enumValue{Value: v, Doc: docs[v]})
	}
	return out
}

// literal returns the value of a basic literal expression, unquoted when it is a string.
func literal(expr ast.Expr) (string, bool) {
	lit, ok := expr.(*ast.BasicLit)
	if !ok {
		return "", false
	}
	if lit.Kind != token.STRING {
		return lit.Value, true
	}
	val, err := strconv.Unquote(lit.Value)
	return val, err == nil
}

// constDoc turns the doc comment of the constant name into a value description: markers
// stripped and the leading Go name dropped, e.g. "ModeOpen admits..." becomes "Admits..."
// and "ModeGCRA is the generic..." becomes "The generic...".
func constDoc(name, text string) string {
	paras, _ := splitComment(text)
	desc := strings.Join(paras, " ")
	if rest, ok := strings.CutPrefix(desc, name+" "); ok {
		rest = strings.TrimPrefix(rest, "is ")
		if rest != "" {
			desc = strings.ToUpper(rest[:1]) + rest[1:]
		}
	}
	return mdText(desc)
}

// splitComment splits comment text into paragraphs (lines joined with spaces) and markers
// (lines starting with "+").
func splitComment(text string) ([]string, []marker) {
	var paras, cur []string
	var markers []marker
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "+"):
			markers = append(markers, parseMarker(line[1:]))
		default:
			cur = append(cur, line)
		}
	}
	flush()
	return paras, markers
}

// parseMarker splits a marker (without its "+") into name and value. For markers taking
// arguments, such as XValidation, the value is the argument list.
func parseMarker(s string) marker {
	for _, name := range argMarkers {
		if args, ok := strings.CutPrefix(s, name+":"); ok {
			return marker{Name: name, Value: args}
		}
	}
	name, value, _ := strings.Cut(s, "=")
	return marker{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)}
}

// markerValue returns the value of the first marker called name, or "".
func markerValue(markers []marker, name string) string {
	for _, m := range markers {
		if m.Name == name {
			return m.Value
		}
	}
	return ""
}

// withoutMarker returns markers minus those called name.
func withoutMarker(markers []marker, name string) []marker {
	return slices.DeleteFunc(slices.Clone(markers), func(m marker) bool { return m.Name == name })
}

// parseArgs parses a marker argument list such as rule="a, b",message=`c`,fieldPath=.x into
// a map; quoted values are unquoted.
func parseArgs(s string) map[string]string {
	args := map[string]string{}
	for s != "" {
		i := strings.IndexAny(s, "=,")
		if i < 0 {
			args[strings.TrimSpace(s)] = ""
			break
		}
		key := strings.TrimSpace(s[:i])
		if s[i] == ',' {
			args[key] = ""
			s = s[i+1:]
			continue
		}
		var value string
		value, s = scanValue(s[i+1:])
		args[key] = value
		s = strings.TrimPrefix(s, ",")
	}
	return args
}

// scanValue reads one argument value from the start of s: a Go string literal in double
// quotes or backticks, or bare text up to the next comma. It returns the value and the rest.
func scanValue(s string) (string, string) {
	switch {
	case strings.HasPrefix(s, `"`):
		end := closingQuote(s)
		if end < 0 {
			return s[1:], ""
		}
		value, err := strconv.Unquote(s[:end+1])
		if err != nil {
			value = s[1:end]
		}
		return value, s[end+1:]
	case strings.HasPrefix(s, "`"):
		end := strings.IndexByte(s[1:], '`')
		if end < 0 {
			return s[1:], ""
		}
		return s[1 : end+1], s[end+2:]
	default:
		i := strings.IndexByte(s, ',')
		if i < 0 {
			return s, ""
		}
		return s[:i], s[i:]
	}
}

// closingQuote returns the index of the double quote closing the string literal at the start
// of s, or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unquoteValue unquotes a marker value written as a Go string literal; bare values are
// returned as they are.
func unquoteValue(v string) string {
	if strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "`") {
		value, _ := scanValue(v)
		return value
	}
	return v
}

// ruleMessages lists the messages of the XValidation markers called name; a rule without a
// message is shown as its CEL expression.
func ruleMessages(markers []marker, name string) []string {
	var msgs []string
	for _, m := range markers {
		if m.Name == name {
			msgs = append(msgs, ruleMessage(m.Value))
		}
	}
	return msgs
}

// ruleMessage renders one XValidation argument list as its message, or its rule when it has
// no message.
func ruleMessage(args string) string {
	parsed := parseArgs(args)
	if msg := parsed["message"]; msg != "" {
		return mdText(msg)
	}
	return codeSpan(parsed["rule"])
}

// validations summarises the validation markers compactly, in marker order, e.g.
// "minLength 1, maxLength 63, pattern `^[a-z]+$`; each item: maxLength 8".
func validations(markers []marker) string {
	var top, items []string
	for _, m := range markers {
		if name, ok := strings.CutPrefix(m.Name, itemsPrefix); ok {
			items = appendNonEmpty(items, validationText(name, m.Value))
		} else if name, ok := strings.CutPrefix(m.Name, validationPrefix); ok {
			top = appendNonEmpty(top, validationText(name, m.Value))
		}
	}
	top = appendNonEmpty(top, listTypeText(markers))
	var groups []string
	if len(top) > 0 {
		groups = append(groups, strings.Join(top, ", "))
	}
	if len(items) > 0 {
		groups = append(groups, "each item: "+strings.Join(items, ", "))
	}
	return strings.Join(groups, "; ")
}

// appendNonEmpty appends s to list unless s is empty.
func appendNonEmpty(list []string, s string) []string {
	if s == "" {
		return list
	}
	return append(list, s)
}

// validationText renders one validation marker (name without its prefix), or "" for markers
// that are not validations shown to users.
func validationText(name, value string) string {
	if label, ok := numericValidations[name]; ok {
		return label + " " + value
	}
	switch name {
	case "Pattern":
		return "pattern " + codeSpan(unquoteValue(value))
	case "Format":
		return "format " + codeSpan(unquoteValue(value))
	case "Enum":
		return "one of " + codeList(strings.Split(value, ";"))
	case "UniqueItems":
		if value == "true" {
			return "unique items"
		}
	case "XValidation":
		return "rule: " + ruleMessage(value)
	}
	return ""
}

// listTypeText describes the uniqueness a +listType marker enforces.
func listTypeText(markers []marker) string {
	switch markerValue(markers, "listType") {
	case "set":
		return "unique items"
	case "map":
		var keys []string
		for _, m := range markers {
			if m.Name == "listMapKey" {
				keys = append(keys, m.Value)
			}
		}
		if len(keys) > 0 {
			return "unique by " + codeList(keys)
		}
	}
	return ""
}

// sectionOrder is the order of the type sections: each root type (kinds before their lists),
// followed breadth-first by the types reachable from its fields, status fields last; then the
// remaining types by name.
func sectionOrder(pkg *apiPackage) []string {
	seen := map[string]bool{}
	var order []string
	for _, root := range rootTypes(pkg) {
		seen[root] = true
		order = append(order, root)
		for _, seed := range rootSeeds(pkg.Types[root]) {
			order = append(order, breadthFirst(pkg, seed, seen)...)
		}
	}
	var rest []string
	for name := range pkg.Types {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(order, rest...)
}

// rootTypes lists the types marked +kubebuilder:object:root, each kind before list types.
func rootTypes(pkg *apiPackage) []string {
	var roots []string
	for name, t := range pkg.Types {
		if slices.ContainsFunc(t.Markers, func(m marker) bool { return m.Name == markerRoot && m.Value != "false" }) {
			roots = append(roots, name)
		}
	}
	isList := func(name string) bool {
		base, ok := strings.CutSuffix(name, "List")
		return ok && pkg.Types[base] != nil
	}
	slices.SortFunc(roots, func(a, b string) int {
		if la, lb := isList(a), isList(b); la != lb {
			if la {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	return roots
}

// rootSeeds lists the local types the fields of a root type refer to, in field order, with
// those of the status field last.
func rootSeeds(t *typeDoc) []string {
	var seeds, status []string
	for _, f := range t.Fields {
		if f.Name == "status" {
			status = append(status, f.Refs...)
		} else {
			seeds = append(seeds, f.Refs...)
		}
	}
	return append(seeds, status...)
}

// breadthFirst lists the types reachable from start that are not yet seen, breadth-first in
// field order, and marks them seen.
func breadthFirst(pkg *apiPackage, start string, seen map[string]bool) []string {
	var order []string
	queue := []string{start}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		t := pkg.Types[name]
		if seen[name] || t == nil {
			continue
		}
		seen[name] = true
		order = append(order, name)
		for _, f := range t.Fields {
			queue = append(queue, f.Refs...)
		}
	}
	return order
}

// referrers maps each type to the types whose fields refer to it, in section order.
func referrers(pkg *apiPackage, order []string) map[string][]string {
	refs := map[string][]string{}
	for _, name := range order {
		for _, f := range pkg.Types[name].Fields {
			for _, r := range f.Refs {
				if !slices.Contains(refs[r], name) {
					refs[r] = append(refs[r], name)
				}
			}
		}
	}
	return refs
}

// render writes the Markdown reference of pkg; source names the documented directory in the
// generated-file notice.
func render(pkg *apiPackage, source string) []byte {
	var b strings.Builder
	order := sectionOrder(pkg)
	usedBy := referrers(pkg, order)
	writeHeader(&b, pkg, source)
	writeContents(&b, order)
	for _, name := range order {
		writeSection(&b, pkg.Types[name], usedBy[name])
	}
	return []byte(b.String())
}

// writeHeader writes the title and the generated-file notice.
func writeHeader(b *strings.Builder, pkg *apiPackage, source string) {
	title := pkg.Version
	if pkg.Group != "" {
		title = pkg.Group + "/" + pkg.Version
	}
	fmt.Fprintf(b, "# API reference: %s\n\n", title)
	fmt.Fprintf(b, "Generated by `make docs` from %s; do not edit.\n\n", source)
}

// writeContents writes the table of contents.
func writeContents(b *strings.Builder, order []string) {
	b.WriteString("## Contents\n\n")
	for _, name := range order {
		fmt.Fprintf(b, "- %s\n", link(name))
	}
}

// writeSection writes the section of one type; usedBy are the types referring to it.
func writeSection(b *strings.Builder, t *typeDoc, usedBy []string) {
	fmt.Fprintf(b, "\n## %s\n\n", t.Name)
	for _, p := range t.Doc {
		fmt.Fprintf(b, "%s\n\n", p)
	}
	if line := resourceLine(t.Markers); line != "" {
		fmt.Fprintf(b, "%s\n\n", line)
	}
	if len(usedBy) > 0 {
		links := make([]string, len(usedBy))
		for i, name := range usedBy {
			links[i] = link(name)
		}
		fmt.Fprintf(b, "Appears in: %s\n\n", strings.Join(links, ", "))
	}
	for _, n := range t.Notes {
		fmt.Fprintf(b, "%s\n\n", n)
	}
	writeRules(b, t.Rules)
	switch t.Kind {
	case kindStruct:
		writeFields(b, t.Fields)
	case kindEnum:
		writeEnum(b, t)
	default:
		fmt.Fprintf(b, "Type: %s\n", codeSpan(t.Underlying))
		if t.Validation != "" {
			fmt.Fprintf(b, "\nValidation: %s\n", t.Validation)
		}
	}
}

// resourceLine describes the scope and short names of a +kubebuilder:resource type, or "".
func resourceLine(markers []marker) string {
	var args map[string]string
	for _, m := range markers {
		if m.Name == markerResource {
			args = parseArgs(m.Value)
		}
	}
	if args == nil {
		return ""
	}
	scope := args["scope"]
	if scope == "" {
		scope = "Namespaced"
	}
	line := "Scope: " + scope + "."
	if short := args["shortName"]; short != "" {
		line += " Short names: " + codeList(strings.Split(short, ";")) + "."
	}
	return line
}

// writeRules writes the type-level validation rules as a bullet list.
func writeRules(b *strings.Builder, rules []string) {
	if len(rules) == 0 {
		return
	}
	b.WriteString("Rules:\n\n")
	for _, r := range rules {
		fmt.Fprintf(b, "- %s\n", r)
	}
	b.WriteString("\n")
}

// writeFields writes the field table of a struct.
func writeFields(b *strings.Builder, fields []fieldDoc) {
	if len(fields) == 0 {
		b.WriteString("No fields.\n")
		return
	}
	b.WriteString("| Field | Type | Required | Default | Description |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, f := range fields {
		required := "No"
		if f.Required {
			required = "Yes"
		}
		desc := f.Description
		if f.Validation != "" {
			desc = joinNonEmpty("<br>", desc, "Validation: "+f.Validation)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n",
			cell(codeSpan(f.Name)), cell(f.Type), required, cell(f.Default), cell(desc))
	}
}

// writeEnum writes the values of an enum: a table when any value is described, else a list.
func writeEnum(b *strings.Builder, t *typeDoc) {
	values := make([]string, len(t.Values))
	described := false
	for i, v := range t.Values {
		values[i] = v.Value
		described = described || v.Doc != ""
	}
	if !described {
		fmt.Fprintf(b, "Type: %s, one of %s.\n", codeSpan(t.Underlying), codeList(values))
		return
	}
	fmt.Fprintf(b, "Type: %s, one of:\n\n", codeSpan(t.Underlying))
	b.WriteString("| Value | Description |\n")
	b.WriteString("| --- | --- |\n")
	for _, v := range t.Values {
		fmt.Fprintf(b, "| %s | %s |\n", cell(codeSpan(v.Value)), cell(v.Doc))
	}
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), sep)
}

// link links to the section of a local type.
func link(name string) string {
	return "[" + name + "](#" + strings.ToLower(name) + ")"
}

// codeSpan renders s as inline code, with a fence longer than any backtick run in s.
func codeSpan(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// codeList renders values as comma-separated inline code.
func codeList(values []string) string {
	spans := make([]string, len(values))
	for i, v := range values {
		spans[i] = codeSpan(v)
	}
	return strings.Join(spans, ", ")
}

// mdText escapes doc comment prose for Markdown.
func mdText(s string) string {
	return mdEscaper.Replace(s)
}

// escapeAll escapes each of paras for Markdown.
func escapeAll(paras []string) []string {
	out := make([]string, len(paras))
	for i, p := range paras {
		out[i] = mdText(p)
	}
	return out
}

// cell makes Markdown safe inside a table cell: pipes, even inside inline code, are escaped.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
