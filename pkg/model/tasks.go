package model

import "fmt"

// TaskKind names one of the Dorylus tasks an epoch of a layer is cut into: the graph-parallel
// ones run on the graph servers, the tensor-parallel ones on the tensor workers, WU on the
// parameter servers.
type TaskKind uint8

// The task kinds, forward then backward.
const (
	TaskGA     TaskKind = iota // Gather: Z = Â P on the rows of an interval (graph server)
	TaskAV                     // ApplyVertex: P = drop(σ(Z)) W, or the loss in the output layer (worker)
	TaskSC                     // Scatter: send boundary rows to their ghost copies (graph server)
	TaskAE                     // ApplyEdge: per-edge attention (GAT only, worker)
	TaskBackAV                 // ∇AV: dW and dZ from dP (worker)
	TaskBackSC                 // ∇SC: send gradient rows of ghosts back to their owners (graph server)
	TaskBackGA                 // ∇GA: dP = Âᵀ dZ (graph server)
	TaskBackAE                 // ∇AE: attention backward (GAT only, worker)
	TaskWU                     // WeightUpdate: apply the optimizer to the summed gradients (parameter server)
)

var taskNames = [...]string{"GA", "AV", "SC", "AE", "∇AV", "∇SC", "∇GA", "∇AE", "WU"}

// String returns the task's name as the paper writes it.
func (k TaskKind) String() string {
	if int(k) < len(taskNames) {
		return taskNames[k]
	}
	return fmt.Sprintf("TaskKind(%d)", k)
}

// IsTensor reports whether the task runs on a tensor worker rather than a graph or parameter server.
func (k TaskKind) IsTensor() bool {
	return k == TaskAV || k == TaskAE || k == TaskBackAV || k == TaskBackAE
}
