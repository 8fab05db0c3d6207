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

// OutputSpec is where a job writes its outputs (spec.output): a location, and whether an
// export already there may be replaced. Every export is a new version in its own folder
// (v-<job UID>-N) beside what the location holds; the model card (model.json) or, of an
// inference, the manifest (predict.json), written last at the top of the location, names it, so
// a reader sees the old export or the new one, whole; the older version is deleted after.
// (OutputLocation's rule, exactly one of s3 and pvc, holds here too.)
type OutputSpec struct {
	OutputLocation `json:",inline"`
	// Overwrite lets the job replace a model or predictions another job or run wrote there.
	// Unset, the graph servers of a job whose location holds one stop at start, naming it (the
	// job fails); the job's own export, written before a restart, is replaced either way.
	// +optional
	Overwrite bool `json:"overwrite,omitempty"`
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
