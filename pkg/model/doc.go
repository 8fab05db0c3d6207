// Package model writes GNN models as the Dorylus task sequence, so that the single-process
// trainer, the distributed graph servers and the serverless workers all run the same task code.
//
// A GCN layer l computes H_{l+1} = σ(Â H_l W_l). We apply the weight before aggregating
// (Â (H W) = (Â H) W), as Kipf's reference and PyTorch Geometric do, so Gather always runs on the
// narrower side of the layer and sparse input features are never aggregated densely. Cut into
// Dorylus tasks, with Z_l the gathered output of layer l:
//
//	AV_0      P_0 = drop(X) W_0                          tensor task (worker)
//	SC_0      send boundary rows of P_0 to their ghosts  graph server
//	GA_l      Z_l = Â P_l                                graph server
//	AV_l      P_l = drop(ReLU(Z_{l-1})) W_l, l ≥ 1       tensor task
//	AV_L      softmax cross-entropy on Z_{L-1}            tensor task (the output layer's AV)
//
// so that each GA_l → AV_{l+1} → SC_{l+1} is exactly the GA → AV → SC step of the paper, with
// AV = σ(Z W). The backward pass runs the same steps in reverse: ∇AV_L gives dZ_{L-1}; ∇GA_l
// computes dP_l = Âᵀ dZ_l; ∇SC sends dP rows back to the owners of ghost vertices; ∇AV_l gives
// dW_l = drop(ReLU(Z_{l-1}))ᵀ dP_l and dZ_{l-1}; WU applies Adam to the summed dW.
//
// Tensor tasks are stateless: a backward task recomputes its activation from the same inputs and
// regenerates its dropout mask from a key derived from (seed, epoch, layer) and the global row id,
// so a worker holding any interval of rows reproduces the forward pass exactly. A task that keeps
// no activation (AVForward and AVBackward with act nil) computes a dense one a block of rows at a
// time, never writing it out whole.
package model
