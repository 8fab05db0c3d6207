package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// gatSmall is a 3-layer GAT for the gradient checks: 2 concatenated heads of 3 features, 2
// averaged output heads, both dropouts on.
func gatSmall(inDim int) GATConfig {
	return GATConfig{InDim: inDim, Hidden: 3, Heads: 2, OutHeads: 2, Classes: 3, Layers: 3, Dropout: 0.3, AttentionDropout: 0.4}
}

// randParams returns random parameters of cfg with biases away from zero.
func randParams(rng *rand.Rand, cfg GATConfig) GATParams {
	p := cfg.NewParams()
	for _, x := range p.Tensors() {
		for i := range x.Data {
			x.Data[i] = float32(rng.NormFloat64()) * 0.5
		}
	}
	return p
}

func TestGATAVHiddenLayerGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	cfg := gatSmall(5)
	params := randParams(rng, cfg)
	const rows, l = 7, 1
	s := cfg.Shape(l)
	for _, train := range []bool{false, true} {
		z := randDense(rng, rows, s.In, 0)
		in := &AVInput{Layer: l, Z: z, RowOffset: 5, Key: DropoutKey(3, 4, l), Train: train}
		prev := params[l-1].Bias
		rP, rD, rS := randDense(rng, rows, s.Width(), 0), randDense(rng, rows, s.Heads, 0), randDense(rng, rows, s.Heads, 0)
		loss := func() float64 { // Σ R ⊙ P + Σ R_dst ⊙ s_dst + Σ R_src ⊙ s_src
			var act GATActivation
			out := cfg.NewVertex(l, rows)
			if err := cfg.AVForward(in, prev, params[l], &act, out); err != nil {
				t.Fatal(err)
			}
			return dot(out.P, rP) + dot(out.DstScore, rD) + dot(out.SrcScore, rS)
		}
		var act GATActivation
		v := cfg.NewVertex(l, rows)
		if err := cfg.AVForward(in, prev, params[l], &act, v); err != nil {
			t.Fatal(err)
		}
		dv := &GATVertex{P: rP.Clone(), DstScore: rD, SrcScore: rS}
		g := cfg.NewParams()
		dZ := tensor.NewDense(rows, s.In)
		if err := cfg.AVBackward(in, params[l], g[l], &act, v, dv, dZ, g[l-1].Bias); err != nil {
			t.Fatal(err)
		}
		checkGrad(t, "dW", params[l].W, g[l].W, loss)
		checkGrad(t, "da_dst", params[l].ADst, g[l].ADst, loss)
		checkGrad(t, "da_src", params[l].ASrc, g[l].ASrc, loss)
		checkGrad(t, "db_prev", prev, g[l-1].Bias, loss)
		checkGrad(t, "dZ", z, dZ, loss)
	}
}

func TestGATAVInputLayerGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	cfg := gatSmall(9)
	params := randParams(rng, cfg)
	const rows = 8
	s := cfg.Shape(0)
	feats := map[string]graph.Features{"sparse": {Sparse: randSparse(rng, rows, 9, 0.3)}, "dense": {Dense: randDense(rng, rows, 9, 0)}}
	for name, f := range feats {
		in := &AVInput{Layer: 0, Features: f, RowOffset: 2, Key: DropoutKey(1, 2, 0), Train: true}
		rP, rD, rS := randDense(rng, rows, s.Width(), 0), randDense(rng, rows, s.Heads, 0), randDense(rng, rows, s.Heads, 0)
		loss := func() float64 {
			var act GATActivation
			out := cfg.NewVertex(0, rows)
			if err := cfg.AVForward(in, nil, params[0], &act, out); err != nil {
				t.Fatal(err)
			}
			return dot(out.P, rP) + dot(out.DstScore, rD) + dot(out.SrcScore, rS)
		}
		var act GATActivation
		v := cfg.NewVertex(0, rows)
		if err := cfg.AVForward(in, nil, params[0], &act, v); err != nil {
			t.Fatal(err)
		}
		g := cfg.NewParams()
		if err := cfg.AVBackward(in, params[0], g[0], &act, v, &GATVertex{P: rP.Clone(), DstScore: rD, SrcScore: rS}, nil, nil); err != nil {
			t.Fatal(err)
		}
		checkGrad(t, name+" dW", params[0].W, g[0].W, loss)
		checkGrad(t, name+" da_dst", params[0].ADst, g[0].ADst, loss)
		checkGrad(t, name+" da_src", params[0].ASrc, g[0].ASrc, loss)
	}
}

// selfLoopGraph is a random n-vertex graph with self loops, as the GAT trainer builds it.
func selfLoopGraph(rng *rand.Rand, n int) *tensor.CSR {
	return withSelfLoops(smallDataset(rng, n, 2, 2).Adj)
}

// TestGATAEGradients checks ∇AE on one interval of in-edges (not the first, so that the dropout
// keys use a nonzero edge offset) with attention dropout on, through the graph server's sum of
// the source gradients.
func TestGATAEGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	cfg := gatSmall(4)
	const n, l = 12, 0
	heads := cfg.Shape(l).Heads
	adj := selfLoopGraph(rng, n)
	p := rowBlock(adj, 4, 9)
	// Scores on a grid offset from the integers keep every logit s_dst + s_src ≥ 0.25 away from
	// the LeakyReLU's kink, so the finite differences stay on one side.
	dst, src := tensor.NewDense(p.adj.Rows, heads), tensor.NewDense(n, heads)
	for i := range dst.Data {
		dst.Data[i] = float32(rng.IntN(5)-2) + 0.5
	}
	for i := range src.Data {
		src.Data[i] = float32(rng.IntN(5)-2) + 0.25
	}
	for _, train := range []bool{false, true} {
		in := &AEInput{Layer: l, Adj: p.adj, DstScore: dst, SrcScore: src, RowOffset: p.lo, Key: AttentionKey(7, 1, l), Train: train}
		nnz := int(p.adj.NNZ())
		r := randDense(rng, nnz, heads, 0) // loss = Σ R ⊙ α̃
		loss := func() float64 {
			alpha := tensor.NewDense(nnz, heads)
			if err := cfg.AEForward(in, alpha); err != nil {
				t.Fatal(err)
			}
			return dot(alpha, r)
		}
		grad, dDst := r.Clone(), tensor.NewDense(p.adj.Rows, heads)
		if err := cfg.AEBackward(in, grad, dDst); err != nil {
			t.Fatal(err)
		}
		at, perm := tensor.EdgeTranspose(p.adj)
		dSrc := tensor.NewDense(n, heads)
		tensor.EdgeSum(dSrc, at, grad, perm)
		checkGrad(t, "ds_dst", dst, dDst, loss)
		checkGrad(t, "ds_src", src, dSrc, loss)
	}
}

// TestGATAttentionDropoutKeyedByEdge checks that the attention mask of an edge depends on its
// global position only: cutting the destinations into intervals changes no coefficient.
func TestGATAttentionDropoutKeyedByEdge(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	cfg := gatSmall(4)
	const n = 30
	adj := selfLoopGraph(rng, n)
	dst, src := randDense(rng, n, 2, 0), randDense(rng, n, 2, 0)
	whole := tensor.NewDense(int(adj.NNZ()), 2)
	key := AttentionKey(1, 2, 0)
	if err := cfg.AEForward(&AEInput{Adj: adj, DstScore: dst, SrcScore: src, Key: key, Train: true}, whole); err != nil {
		t.Fatal(err)
	}
	cut := tensor.NewDense(whole.Rows, 2)
	for _, b := range [][2]int{{0, 7}, {7, 8}, {8, 30}} {
		p := rowBlock(adj, b[0], b[1])
		in := &AEInput{Adj: p.adj, DstScore: dst.RowSlice(b[0], b[1]), SrcScore: src, RowOffset: b[0], Key: key, Train: true}
		if err := cfg.AEForward(in, edgeRows(cut, p)); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(whole.Data, cut.Data) {
		t.Fatal("coefficients differ when the destinations are cut into intervals")
	}
	dropped := 0
	for _, v := range whole.Data {
		if v == 0 {
			dropped++
		}
	}
	if frac := float64(dropped) / float64(len(whole.Data)); math.Abs(frac-0.4) > 0.15 {
		t.Errorf("%.2f of the coefficients dropped, want about 0.4", frac)
	}
}

func TestGATOutputGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	cfg := gatSmall(4)
	z, bias := randDense(rng, 5, cfg.OutHeads*cfg.Classes, 0), randDense(rng, 1, cfg.Classes, 0)
	r := randDense(rng, 5, cfg.Classes, 0)
	dZ, dB := tensor.NewDense(5, z.Cols), tensor.NewDense(1, cfg.Classes)
	if err := cfg.OutputBackward(r, dZ, dB); err != nil {
		t.Fatal(err)
	}
	loss := func() float64 {
		logits := tensor.NewDense(5, cfg.Classes)
		if err := cfg.OutputForward(z, bias, logits); err != nil {
			t.Fatal(err)
		}
		return dot(logits, r)
	}
	checkGrad(t, "dZ", z, dZ, loss)
	checkGrad(t, "dbias", bias, dB, loss)
}

// TestGATWholeModelGradient checks the backward pass of a 3-layer GAT, tasks chained as the
// trainer chains them over 3 intervals, against finite differences of the training loss with
// respect to every parameter.
func TestGATWholeModelGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	d := smallDataset(rng, 14, 6, 3)
	tr, err := NewGATTrainer(d, GATTrainConfig{GAT: gatSmall(6), LR: 0.01, Seed: 5, Intervals: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tr.params.Tensors() { // biases and larger weights make every path matter
		for i := range x.Data {
			x.Data[i] = float32(rng.NormFloat64()) * 0.7
		}
	}
	const epoch = 2
	lossAt := func() (float64, string) {
		if err := tr.forward(epoch, true); err != nil {
			t.Fatal(err)
		}
		l, err := LossForward(tr.logits, d.Labels, d.Train, len(d.Train), nil)
		if err != nil {
			t.Fatal(err)
		}
		return l, logitSigns(tr)
	}
	tr.adam.cfg.LR = 0 // one epoch leaves the parameters in place and the gradients in grads
	if _, err := tr.Epoch(epoch); err != nil {
		t.Fatal(err)
	}
	names := []string{"W", "a_dst", "a_src", "b"}
	skipped, total := 0, 0
	for i, x := range tr.flatP {
		skipped += checkGradKinked(t, names[i%4]+string(rune('0'+i/4)), x, tr.flatG[i].Clone(), lossAt)
		total += len(x.Data)
	}
	if skipped > total/10 {
		t.Fatalf("%d of %d elements skipped next to a kink", skipped, total)
	}
}

// checkGradKinked is checkGrad for a loss with kinks (the LeakyReLU of every attention logit).
// f returns the loss and the signs of all logits; a central difference whose two ends see
// different signs straddles a kink, so the step shrinks, and an element whose every step
// straddles one is skipped. It returns the number skipped.
func checkGradKinked(t *testing.T, name string, x, analytic *tensor.Dense, f func() (float64, string)) int {
	t.Helper()
	worst, skipped := 0.0, 0
	_, sig := f()
	for i := range x.Data {
		ok := false
		for _, eps := range []float32{1e-2, 2e-3} {
			orig := x.Data[i]
			x.Data[i] = orig + eps
			up, sigUp := f()
			x.Data[i] = orig - eps
			down, sigDown := f()
			x.Data[i] = orig
			if sigUp != sig || sigDown != sig {
				continue
			}
			num := (up - down) / (2 * float64(eps))
			err := math.Abs(num-float64(analytic.Data[i])) / math.Max(1, math.Abs(num))
			if err > 2e-3 {
				t.Fatalf("%s: element %d analytic %.6f numeric %.6f (step %g)", name, i, analytic.Data[i], num, eps)
			}
			worst, ok = math.Max(worst, err), true
			break
		}
		if !ok {
			skipped++
		}
	}
	t.Logf("%s: %d elements (%d skipped), worst relative error %.2e", name, len(x.Data), skipped, worst)
	return skipped
}

// logitSigns returns the sign of every attention logit s_dst(i) + s_src(j) of every layer.
func logitSigns(tr *GATTrainer) string {
	var b []byte
	for l, v := range tr.v {
		heads := tr.cfg.GAT.Shape(l).Heads
		for i := 0; i < tr.adj.Rows; i++ {
			for k := tr.adj.RowPtr[i]; k < tr.adj.RowPtr[i+1]; k++ {
				j := int(tr.adj.ColIdx[k])
				for h := 0; h < heads; h++ {
					b = append(b, '0'+byte(b2i(v.DstScore.Data[i*heads+h]+v.SrcScore.Data[j*heads+h] > 0)))
				}
			}
		}
	}
	return string(b)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestGATIntervalsAgree trains with the edge tasks cut into 1 and 4 intervals: the runs must be
// identical, since every edge's work and dropout mask depend only on its global position.
func TestGATIntervalsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	d := smallDataset(rng, 40, 8, 3)
	cfg := GATConfig{InDim: 8, Hidden: 4, Heads: 3, OutHeads: 2, Classes: 3, Layers: 2, Dropout: 0.5, AttentionDropout: 0.5}
	var losses [2][]float64
	var params [2]GATParams
	for i, parts := range []int{1, 4} {
		tr, err := NewGATTrainer(d, GATTrainConfig{GAT: cfg, LR: 0.01, WeightDecay: 5e-4, Seed: 9, Intervals: parts})
		if err != nil {
			t.Fatal(err)
		}
		for e := 0; e < 5; e++ {
			l, err := tr.Epoch(e)
			if err != nil {
				t.Fatal(err)
			}
			losses[i] = append(losses[i], l)
		}
		params[i] = tr.Params()
	}
	if !slices.Equal(losses[0], losses[1]) {
		t.Fatalf("losses differ: %v and %v", losses[0], losses[1])
	}
	for i, x := range params[0].Tensors() {
		if !slices.Equal(x.Data, params[1].Tensors()[i].Data) {
			t.Fatalf("parameter %d differs", i)
		}
	}
}

func TestGATConfigValidation(t *testing.T) {
	good := GATConfig{InDim: 4, Hidden: 8, Heads: 8, OutHeads: 1, Classes: 3, Layers: 2, Dropout: 0.6, AttentionDropout: 0.6}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*GATConfig){
		"in":       func(c *GATConfig) { c.InDim = 0 },
		"classes":  func(c *GATConfig) { c.Classes = 1 },
		"layers":   func(c *GATConfig) { c.Layers = 0 },
		"hidden":   func(c *GATConfig) { c.Hidden = 0 },
		"heads":    func(c *GATConfig) { c.Heads = 0 },
		"outheads": func(c *GATConfig) { c.OutHeads = 0 },
		"dropout":  func(c *GATConfig) { c.Dropout = 1 },
		"attn":     func(c *GATConfig) { c.AttentionDropout = float32(math.NaN()) },
	} {
		c := good
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: %+v accepted", name, c)
		}
	}
	if s := good.Shape(0); s != (GATLayerShape{In: 4, Heads: 8, F: 8, Out: 64}) {
		t.Errorf("layer 0 shape %+v", s)
	}
	if s := good.Shape(1); s != (GATLayerShape{In: 64, Heads: 1, F: 3, Out: 3}) {
		t.Errorf("layer 1 shape %+v", s)
	}
}

func TestBestValidationFollowsTheGATPaper(t *testing.T) {
	b := NewBestValidation(2)
	steps := []struct {
		acc, loss float64
		stop      bool
	}{
		{0.5, 1.0, false},  // 1: both improve: kept
		{0.6, 1.1, false},  // 2: accuracy improves only: progress, not kept
		{0.55, 0.9, false}, // 3: loss improves only: progress, not kept
		{0.6, 0.8, false},  // 4: both at least as good: kept
		{0.59, 0.85, false},
		{0.58, 0.81, true}, // 6: second epoch without progress: stop
	}
	for i, s := range steps {
		if got := b.Observe(i+1, Metrics{ValAcc: s.acc, ValLoss: s.loss, TestAcc: float64(i + 1)}); got != s.stop {
			t.Fatalf("epoch %d: stop %v, want %v", i+1, got, s.stop)
		}
	}
	if e, m := b.Best(); e != 4 || m.TestAcc != 4 {
		t.Errorf("kept epoch %d (test %v), want 4", e, m.TestAcc)
	}
}
