package partition

import (
	"fmt"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Method names a way to compute a Plan.
type Method string

// The methods New knows.
const (
	// MethodMultilevel is Multilevel with DefaultSeed: the lowest edge cut, the default.
	MethodMultilevel Method = "multilevel"
	// MethodContiguous is Contiguous: ranges of vertex ids, from the row offsets alone.
	MethodContiguous Method = "contiguous"
	// MethodLabelPropagation is Contiguous improved by Refine.
	MethodLabelPropagation Method = "label-propagation"
)

// DefaultMethod is the method every caller that does not choose one uses: prepare, train with
// graph servers, and graph servers that cut a whole dataset themselves.
const DefaultMethod = MethodMultilevel

// DefaultSeed is the seed of MethodMultilevel, so that every process that cuts the same graph
// into the same number of parts computes the same plan.
const DefaultSeed = 1

// Methods lists the methods New knows, the default first.
func Methods() []Method {
	return []Method{MethodMultilevel, MethodContiguous, MethodLabelPropagation}
}

// ParseMethod returns the method named s ("" is DefaultMethod).
func ParseMethod(s string) (Method, error) {
	if s == "" {
		return DefaultMethod, nil
	}
	for _, m := range Methods() {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, 0, 3)
	for _, m := range Methods() {
		names = append(names, string(m))
	}
	return "", fmt.Errorf("partition: method %q: want one of %s: %w", s, strings.Join(names, ", "), ErrPlan)
}

// New returns the plan of parts parts for the symmetric adjacency adj by method m.
func New(adj *tensor.CSR, parts int, m Method) (Plan, error) {
	return newPlan(adj, parts, m, nil)
}

// newPlan is New, with reload passed to Multilevel as Options.Reload.
func newPlan(adj *tensor.CSR, parts int, m Method, reload func() ([]int32, error)) (Plan, error) {
	switch m {
	case MethodMultilevel:
		return Multilevel(adj, parts, Options{Seed: DefaultSeed, Reload: reload})
	case MethodContiguous, MethodLabelPropagation:
		plan, err := Contiguous(adj.RowPtr, parts)
		if err != nil || m == MethodContiguous {
			return plan, err
		}
		return Refine(adj, plan, RefineOptions{})
	}
	return Plan{}, fmt.Errorf("partition: unknown method %q: %w", m, ErrPlan)
}

// Default returns New(adj, parts, DefaultMethod).
func Default(adj *tensor.CSR, parts int) (Plan, error) { return New(adj, parts, DefaultMethod) }

// FromOwners returns the plan that gives vertex v to part owner[v], renumbering the vertices part
// by part in their original order; every part must own a vertex.
func FromOwners(owner []int32, parts int) (Plan, error) {
	for v, q := range owner {
		if q < 0 || int(q) >= parts {
			return Plan{}, fmt.Errorf("partition: vertex %d assigned to part %d of %d: %w", v, q, parts, ErrPlan)
		}
	}
	return planFromOwners(owner, parts)
}
