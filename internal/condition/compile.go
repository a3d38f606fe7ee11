package condition

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
)

// The names a condition can read.
const (
	// VarMethod is the request method, upper-case; on Envoy RLS the empty string.
	VarMethod = "method"
	// VarHost is the request's host, lower-case and without a port.
	VarHost = "host"
	// VarPath is the request's normalized path.
	VarPath = "path"
	// VarHeaders maps lower-case header names to values; an absent header reads as "".
	VarHeaders = "headers"
	// VarClaims is the payload of the bearer token in the Authorization header.
	VarClaims = "claims"
	// VarDescriptors maps an Envoy descriptor's entry keys to values.
	VarDescriptors = "descriptors"
)

// MaxCost bounds a condition's cost: its estimated worst case at admission, and what one
// evaluation may spend in a sidecar (a request bigger than the estimate assumes is cut off
// there, and its condition does not hold). A comparison of a header with a constant costs
// a handful; a regular expression over a long path a few thousand.
const MaxCost = 100_000

// Bounds the cost estimate assumes of a request; a request beyond them is evaluated with
// its cost tracked, and cut off at MaxCost.
const (
	maxHeaders     = 128
	maxStringBytes = 8 << 10
	maxClaims      = 64
	maxDescriptors = 64
	// maxTokenBytes bounds the bearer tokens whose claims stay within maxClaims and
	// maxStringBytes without counting them.
	maxTokenBytes = 2 << 10
)

// Condition is a compiled condition. Safe for concurrent use.
type Condition struct {
	text string
	// fast runs requests within the bounds the cost estimate assumed (within): the
	// estimate bounds their cost, so nothing is tracked.
	fast cel.Program
	// guarded runs every other request, tracking cost and stopping at MaxCost: tracking
	// costs about three times the evaluation itself, so only requests beyond the
	// estimate's bounds pay it.
	guarded cel.Program
}

// Text is the condition as written.
func (c *Condition) Text() string { return c.text }

// Compile type-checks text as a bool over the request and bounds its estimated cost by
// MaxCost. Its error says what is wrong in words a policy author can act on; the caller
// names the field.
func Compile(text string) (*Condition, error) {
	env, err := environment()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(text)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s", iss.String())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("must be a bool, is %s", ast.OutputType())
	}
	est, err := env.EstimateCost(ast, sizes{})
	if err != nil {
		return nil, fmt.Errorf("estimate cost: %w", err)
	}
	if est.Max > MaxCost {
		return nil, fmt.Errorf("estimated cost %d exceeds %d on the largest request: simplify it (fewer regular expressions or loops over headers)", est.Max, MaxCost)
	}
	c := &Condition{text: text}
	if c.fast, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	if c.guarded, err = env.Program(ast, cel.CostLimit(MaxCost), cel.EvalOptions(cel.OptOptimize)); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return c, nil
}

var (
	envOnce sync.Once
	env     *cel.Env
	errEnv  error
)

// environment is the CEL environment every condition is checked in, built once.
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		env, errEnv = cel.NewEnv(
			cel.Variable(VarMethod, cel.StringType),
			cel.Variable(VarHost, cel.StringType),
			cel.Variable(VarPath, cel.StringType),
			cel.Variable(VarHeaders, cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable(VarClaims, cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable(VarDescriptors, cel.MapType(cel.StringType, cel.StringType)),
		)
		if errEnv != nil {
			errEnv = fmt.Errorf("cel environment: %w", errEnv)
		}
	})
	return env, errEnv
}

// sizes is what the cost estimate assumes of a request's values.
type sizes struct{}

func (sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	switch {
	case len(path) == 1 && path[0] == VarHeaders:
		return &checker.SizeEstimate{Min: 0, Max: maxHeaders}
	case len(path) == 1 && path[0] == VarClaims:
		return &checker.SizeEstimate{Min: 0, Max: maxClaims}
	case len(path) == 1 && path[0] == VarDescriptors:
		return &checker.SizeEstimate{Min: 0, Max: maxDescriptors}
	}
	return &checker.SizeEstimate{Min: 0, Max: maxStringBytes}
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// ErrRepeatedHeader is the error of a condition that read a header sent on several field
// lines: the condition and the upstream could read different values, so the request is
// refused rather than placed in a tier.
var ErrRepeatedHeader = errors.New("sent on several field lines, so the condition and the upstream could read different values")
