package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/lint"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// errRefused is lint's error when a document would be refused: the reasons are printed
// already, so the error only counts them.
var errRefused = errors.New("would be refused")

// lintOptions are the flags of "kubectl ratelimit lint".
type lintOptions struct {
	conn      *connectionOptions
	files     []string
	recursive bool
	keyPrefix string
	output    string
	strict    bool
	// stdin is read for "-f -".
	stdin io.Reader
}

// newLintCommand is "kubectl ratelimit lint".
func newLintCommand(conn *connectionOptions) *cobra.Command {
	o := &lintOptions{conn: conn}
	cmd := &cobra.Command{
		Use:   "lint -f FILE|DIR|- ...",
		Short: "Check policy files offline as the cluster would admit them",
		Long: `Check RateLimitPolicy, RateLimitOverride and RedisBackend documents offline, as the cluster
would admit them: the API server's schema checks of this release's CustomResourceDefinitions
(unknown fields, types, defaults, CEL rules), then the admission webhook's own defaulting,
validation and warnings for each policy, with the same messages naming the same fields. An
override whose policy is among the files is checked against it as the controller does.
Documents of other kinds are skipped, so a whole GitOps folder can be given.

Nothing is sent anywhere. A document without metadata.namespace is checked in -n's namespace
(else the kubeconfig context's, else default). The exit status is 1 when any document would
be refused (with --strict, also when any would be admitted with warnings), for CI and
pre-commit hooks.`,
		Example: `  kubectl ratelimit lint -f config/samples/example-app/ratelimitpolicy.yaml
  kubectl ratelimit lint -R -f deploy/ --strict
  kustomize build overlays/prod | kubectl ratelimit lint -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdin = cmd.InOrStdin()
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "`FILE`, folder or - (stdin) to check; repeatable")
	f.BoolVarP(&o.recursive, "recursive", "R", false, "check the folders given with -f and every folder below them")
	f.StringVar(&o.keyPrefix, "key-prefix", keylayout.DefaultPrefix, "the installation's key prefix (the manager's --key-prefix)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.BoolVar(&o.strict, "strict", false, "exit 1 when a document would be admitted with warnings, too")
	return cmd
}

// run reads every file given, checks its documents and prints the results.
func (o *lintOptions) run(ctx context.Context, out io.Writer) error {
	if len(o.files) == 0 {
		return errors.New("give the files to check with -f (a file, a folder, or - for stdin)")
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	if err := keylayout.ValidatePrefix(o.keyPrefix); err != nil {
		return fmt.Errorf("--key-prefix: %w", err)
	}
	ns, err := o.conn.namespace()
	if err != nil {
		return err
	}
	l, err := lint.New(policy.Rules{KeyPrefix: o.keyPrefix}, ns)
	if err != nil {
		return err
	}
	docs, err := o.read()
	if err != nil {
		return err
	}
	results, skipped := l.Lint(ctx, docs)
	if err := writeLint(out, o.output, results, skipped); err != nil {
		return err
	}
	return o.verdict(results)
}

// read is every document of every file given, in order (a folder's files by name).
func (o *lintOptions) read() ([]lint.Document, error) {
	var docs []lint.Document
	for _, name := range o.files {
		paths, err := o.expand(name)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			d, err := o.readOne(p)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d...)
		}
	}
	return docs, nil
}

// readOne is the documents of one file, or of stdin for "-".
func (o *lintOptions) readOne(path string) ([]lint.Document, error) {
	if path == "-" {
		return lint.Read("stdin", o.stdin)
	}
	f, err := os.Open(path) //nolint:gosec // reading the files the user names is the command.
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return lint.Read(path, f)
}

// expand is name itself, or for a folder its .yaml, .yml and .json files (and, with -R,
// those of every folder below it), sorted.
func (o *lintOptions) expand(name string) ([]string, error) {
	if name == "-" {
		return []string{name}, nil
	}
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{name}, nil
	}
	var out []string
	err = filepath.WalkDir(name, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != name && !o.recursive:
			return fs.SkipDir
		case !d.IsDir() && isManifest(path):
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// isManifest reports whether path names a YAML or JSON file.
func isManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// verdict is errRefused (counted) when a document would be refused, or, with --strict,
// admitted with warnings.
func (o *lintOptions) verdict(results []lint.Result) error {
	refused, warned := 0, 0
	for _, r := range results {
		switch {
		case len(r.Errors) > 0:
			refused++
		case len(r.Warnings) > 0:
			warned++
		}
	}
	if refused > 0 {
		return fmt.Errorf("%d of %d %w", refused, len(results), errRefused)
	}
	if o.strict && warned > 0 {
		return fmt.Errorf("%d of %d would be admitted with warnings (--strict)", warned, len(results))
	}
	return nil
}

// lintJSON is one result as -o json prints it.
type lintJSON struct {
	Source    string   `json:"source"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	Admitted  bool     `json:"admitted"`
	Errors    []string `json:"errors,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// writeLint prints results: one line a document and one indented line a reason, then a
// summary; or, with -o json, {results, skipped}.
func writeLint(w io.Writer, format string, results []lint.Result, skipped int) error {
	rows := make([]lintJSON, 0, len(results))
	for _, r := range results {
		row := lintJSON{Source: r.Source, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
			Admitted: len(r.Errors) == 0, Warnings: r.Warnings}
		for _, e := range r.Errors {
			row.Errors = append(row.Errors, e.Error())
		}
		rows = append(rows, row)
	}
	if format == "json" {
		body, err := json.Marshal(map[string]any{"results": rows, "skipped": skipped})
		if err != nil {
			return err
		}
		return writeJSON(w, body)
	}
	var b strings.Builder
	admitted := 0
	for _, r := range rows {
		verdict := "refused"
		if r.Admitted {
			verdict, admitted = "admitted", admitted+1
		}
		fmt.Fprintf(&b, "%s: %s %s: %s\n", r.Source, r.Kind, objectName(r.Namespace, r.Name), verdict)
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "  error: %s\n", printable(e))
		}
		for _, warning := range r.Warnings {
			fmt.Fprintf(&b, "  warning: %s\n", printable(warning))
		}
	}
	fmt.Fprintf(&b, "%d checked: %d admitted, %d refused; %d documents of other kinds skipped\n",
		len(rows), admitted, len(rows)-admitted, skipped)
	_, err := io.WriteString(w, b.String())
	return err
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
