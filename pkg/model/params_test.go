package model

import (
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// TestParametersOf checks that the parameters told by layer widths are those the
// single-process trainers make: a GCN's weight matrices (decay on the first), a GAT's W,
// a_dst, a_src and bias of every layer (decay on all), with the same initial values; and that
// widths that fit no model are refused with the reason.
func TestParametersOf(t *testing.T) {
	gcn, err := ParametersOf([]int{6, 4, 4, 3}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]int{{6, 4}, {4, 4}, {4, 3}}; !slices.Equal(gcn.Shapes, want) {
		t.Errorf("GCN shapes %v, want %v", gcn.Shapes, want)
	}
	if d := gcn.Decay(0.5); !slices.Equal(d, []float32{0.5, 0, 0}) {
		t.Errorf("GCN decay %v, want 0.5 on the first matrix only", d)
	}
	sameValues(t, "GCN", gcn.Init(7), GCNConfig{InDim: 6, Hidden: 4, Classes: 3, Layers: 3}.InitWeights(7))

	gatCfg := GATConfig{InDim: 5, Hidden: 2, Heads: 4, OutHeads: 1, Classes: 3, Layers: 2}
	gat, err := ParametersOf([]int{5, 8, 3}, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := gatCfg.InitParams(9).Tensors()
	if len(gat.Shapes) != len(ref) {
		t.Fatalf("GAT: %d shapes, want %d tensors", len(gat.Shapes), len(ref))
	}
	for i, w := range ref {
		if gat.Shapes[i] != [2]int{w.Rows, w.Cols} {
			t.Errorf("GAT tensor %d: shape %v, want %d×%d", i, gat.Shapes[i], w.Rows, w.Cols)
		}
	}
	if d := gat.Decay(0.5); len(d) != 8 || slices.ContainsFunc(d, func(x float32) bool { return x != 0.5 }) {
		t.Errorf("GAT decay %v, want 0.5 on all 8 tensors", d)
	}
	sameValues(t, "GAT", gat.Init(9), ref)

	for _, c := range []struct {
		dims            []int
		heads, outHeads int
		want            string
	}{
		{[]int{6}, 0, 0, "1 layer widths"},
		{[]int{6, 4, 5, 3}, 0, 0, "every hidden layer must have the same width"},
		{[]int{6, 4, 1}, 0, 0, "gcn: 1 classes"},
		{[]int{6, 5, 4}, 3, 1, "heads"},
		{[]int{6, 6, 4}, 3, 0, "gat: 0 output heads"},
	} {
		if _, err := ParametersOf(c.dims, c.heads, c.outHeads); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("widths %v, heads %d/%d: %v, want an error saying %q", c.dims, c.heads, c.outHeads, err, c.want)
		}
	}
}

// sameValues fails the test unless got and want hold tensors of the same shapes and values.
func sameValues(t *testing.T, what string, got, want []*tensor.Dense) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i].Rows != want[i].Rows || got[i].Cols != want[i].Cols || !slices.Equal(got[i].Data, want[i].Data) {
			t.Errorf("%s: tensor %d differs from the trainer's initial one", what, i)
		}
	}
}

// SAGEParametersOf tells a GraphSAGE network's weights as NewTrainer makes them with SAGE set:
// 2·in × out per layer, the same initial values, decay on the first.
func TestSAGEParametersOf(t *testing.T) {
	p, err := SAGEParametersOf([]int{6, 4, 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]int{{12, 4}, {8, 3}}; !slices.Equal(p.Shapes, want) {
		t.Errorf("shapes %v, want %v", p.Shapes, want)
	}
	if d := p.Decay(0.5); !slices.Equal(d, []float32{0.5, 0}) {
		t.Errorf("decay %v, want 0.5 on the first matrix only", d)
	}
	sameValues(t, "GraphSAGE", p.Init(7), GCNConfig{InDim: 6, Hidden: 4, Classes: 3, Layers: 2}.SAGEInitWeights(7))
	if _, err := SAGEParametersOf([]int{6, 4, 5, 3}); err == nil {
		t.Error("hidden layers of different widths accepted")
	}
}
