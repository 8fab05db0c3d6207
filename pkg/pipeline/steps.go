package pipeline

// step is one position of Sequence with what it exchanges with other intervals. Flows are
// numbered per layer: forward layer l is flow l (the P_l rows SC_l sends and GA_l reads),
// backward layer l is flow Layers+l (the gradient rows of layer l).
type step struct {
	kind     Kind
	layer    int
	consumes int  // flow read from other intervals, -1 if none
	produces int  // flow other intervals read, -1 if none
	weights  bool // uses the interval's pinned weight version
}

// buildSteps returns the steps of Sequence(layers) with the flows each reads and produces
// under gradient flow g, and the index of the first tail step (∇GA_{L-1}).
func buildSteps(layers int, g GradientFlow) (steps []step, split int) {
	L := layers
	for _, st := range Sequence(L) {
		sp := step{kind: st.Kind, layer: st.Layer, consumes: -1, produces: -1}
		switch st.Kind {
		case KindAV:
			sp.weights = st.Layer < L
			if g == PullGradients && st.Layer == L {
				sp.produces = L + L - 1 // the loss gives dZ_{L-1}
			}
		case KindSC:
			sp.produces = st.Layer
		case KindGA:
			sp.consumes = st.Layer
		case KindBackGA:
			if g == PullGradients {
				sp.consumes = L + st.Layer
			}
		case KindBackSC:
			if g == PushGradients {
				sp.produces = L + st.Layer
			}
		case KindBackAV:
			sp.weights = true
			if g == PushGradients {
				sp.consumes = L + st.Layer
			} else if st.Layer > 0 {
				sp.produces = L + st.Layer - 1 // dZ_{l-1}
			}
		case KindWU:
			sp.weights = true
		}
		steps = append(steps, sp)
	}
	return steps, stepIndex(KindBackGA, L-1, L)
}
