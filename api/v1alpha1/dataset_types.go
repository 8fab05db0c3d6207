package v1alpha1

// DatasetSource is where the graph comes from: exactly one of builtin, s3,
// pvc or http.
//
// +kubebuilder:validation:XValidation:rule="[has(self.builtin), has(self.s3), has(self.pvc), has(self.http)].filter(x, x).size() == 1",message="spec.dataset must set exactly one of builtin, s3, pvc, http"
type DatasetSource struct {
	// Builtin is one of the benchmark datasets shipped in the runtime image.
	// +optional
	Builtin *BuiltinDataset `json:"builtin,omitempty"`
	// S3 is a dataset folder in an S3-compatible bucket.
	// +optional
	S3 *S3Location `json:"s3,omitempty"`
	// PVC is a dataset folder on a PersistentVolumeClaim, mounted read-only.
	// +optional
	PVC *PVCLocation `json:"pvc,omitempty"`
	// HTTP is a dataset archive (tar.gz) fetched over HTTP(S).
	// +optional
	HTTP *HTTPLocation `json:"http,omitempty"`

	// Format is the layout an s3, pvc or http dataset must be in: Prepared (the
	// output of `dorylus prepare`: a prepared file, or its partition files, of
	// which each graph server reads only its own), Text (the plain-text
	// benchmark layout), OGB (OGB's node-property-prediction layout) or NumPy
	// (arrays with PyG's names). Unset, the layout is detected. A dataset in
	// another layout than the one named fails the job. Builtin datasets ignore it.
	// +kubebuilder:validation:Enum=Prepared;Text;OGB;NumPy
	// +optional
	Format DatasetFormat `json:"format,omitempty"`
	// PartitionTo, when set, has the operator cut the dataset once, before
	// any server starts, into one checksummed file per graph server (the
	// multilevel cut of `dorylus prepare --partitions`) under parts-N/ at this
	// location (read-write for the partition step, read-only for the graph
	// servers); each graph server then reads only its own file. A job that restarts or
	// resumes, or another job of the same dataset and graph-server count,
	// reuses the files found there. Unset, every graph server loads the whole
	// dataset and cuts it itself (a Prepared dataset already cut into
	// partitions is read file by file either way).
	// +optional
	PartitionTo *OutputLocation `json:"partitionTo,omitempty"`
}

// DatasetFormat is the on-disk layout of a dataset.
type DatasetFormat string

const (
	// DatasetFormatPrepared is the binary layout of `dorylus prepare`, whole or in partitions.
	DatasetFormatPrepared DatasetFormat = "Prepared"
	// DatasetFormatText is the plain-text benchmark layout (datasets/FORMAT.md).
	DatasetFormatText DatasetFormat = "Text"
	// DatasetFormatOGB is OGB's node-property-prediction layout, as it unpacks.
	DatasetFormatOGB DatasetFormat = "OGB"
	// DatasetFormatNumPy is NumPy arrays with PyG's names (.npy files or a .npz).
	DatasetFormatNumPy DatasetFormat = "NumPy"
)

// BuiltinDataset names a benchmark dataset shipped in the runtime image.
type BuiltinDataset struct {
	// Name is the dataset: cora, citeseer, amazon_computers or coauthor_cs.
	// PubMed is not offered: the repository ships it without node features,
	// so no model can train on it; bring it with its features as an s3, pvc
	// or http dataset.
	// +kubebuilder:validation:Enum=cora;citeseer;amazon_computers;coauthor_cs
	Name string `json:"name"`
}

// S3Location is a prefix in an S3-compatible bucket.
type S3Location struct {
	// Bucket is the bucket name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`
	// Prefix is the key prefix of the folder, without a leading slash.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^/].*$`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Region is the bucket's region; unset means the SDK's default chain.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +optional
	Region string `json:"region,omitempty"`
	// Endpoint overrides the S3 endpoint, for S3-compatible stores.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// SecretRef names a Secret in the job's namespace with keys accessKeyID,
	// secretAccessKey and optionally sessionToken. Unset: the pods' service
	// account identity (or the node's) is used.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// SecretReference names a Secret in the job's namespace.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) && size(self.name) <= 253 && self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="secretRef.name must name a Secret: a non-empty DNS subdomain (lowercase letters, digits, '-' and '.')",fieldPath=".name",reason=FieldValueInvalid
type SecretReference struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`
}

// PVCLocation is a folder on a PersistentVolumeClaim in the job's namespace.
type PVCLocation struct {
	// ClaimName is the PersistentVolumeClaim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ClaimName string `json:"claimName"`
	// Path is the folder inside the volume, relative, without "..".
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="path must be relative and must not contain '..'"
	// +optional
	Path string `json:"path,omitempty"`
}

// HTTPLocation is a dataset archive fetched over HTTP(S).
type HTTPLocation struct {
	// URL is the archive's address.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	URL string `json:"url"`
	// SHA256 is the expected hex digest of the archive; a mismatch fails the
	// load.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}

// CheckpointSpec saves the weights every IntervalEpochs epochs to exactly one
// destination.
//
// +kubebuilder:validation:XValidation:rule="[has(self.s3), has(self.pvc)].filter(x, x).size() == 1",message="spec.checkpoint must set exactly one of s3, pvc"
type CheckpointSpec struct {
	// IntervalEpochs is the number of epochs between checkpoints; with a
	// staleness bound, the asynchronous pipeline drains every intervalEpochs
	// epochs to take them.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +kubebuilder:default=10
	// +optional
	IntervalEpochs int32 `json:"intervalEpochs,omitempty"`
	// S3 stores checkpoints under a bucket prefix.
	// +optional
	S3 *S3Location `json:"s3,omitempty"`
	// PVC stores checkpoints on a PersistentVolumeClaim, mounted read-write by
	// the parameter servers.
	// +optional
	PVC *PVCLocation `json:"pvc,omitempty"`
}
