package v1alpha1

// ReasonOutputsWritten (Succeeded): an inference job wrote its outputs to spec.output.
const ReasonOutputsWritten = "OutputsWritten"

// OutputLocation is a folder for a job's outputs, a saved model or partition files: exactly
// one of s3, pvc.
//
// +kubebuilder:validation:XValidation:rule="[has(self.s3), has(self.pvc)].filter(x, x).size() == 1",message="must set exactly one of s3, pvc"
type OutputLocation struct {
	// S3 is a bucket prefix.
	// +optional
	S3 *S3Location `json:"s3,omitempty"`
	// PVC is a folder on a PersistentVolumeClaim.
	// +optional
	PVC *PVCLocation `json:"pvc,omitempty"`
}

// InferenceSpec makes a job run a saved model on its dataset instead of training one: the
// graph servers read the model, compute every vertex's prediction, class probabilities and
// embedding, and write them to spec.output; no parameter servers run, and spec.model and
// spec.training do not apply (the model's card says what it is).
type InferenceSpec struct {
	// Model is the folder a job's spec.output or `dorylus train --output-dir` wrote
	// (model.json and model.safetensors).
	Model OutputLocation `json:"model"`
}
