// Package v1alpha1 holds the dorylus.dev/v1alpha1 API: the GNNTrainingJob kind,
// one distributed Dorylus training run (graph servers, parameter servers and a
// tensor backend) declared as a Kubernetes object.
//
// Invariants live on the CRD: kubebuilder markers give defaults, enums and
// ranges, and CEL rules enforce mutual exclusion (exactly one dataset source,
// exactly one tensor backend), immutability once training has started, and a
// name short enough for every derived child name.
//
// +kubebuilder:object:generate=true
// +groupName=dorylus.dev
package v1alpha1
