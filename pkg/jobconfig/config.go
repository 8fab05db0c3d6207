package jobconfig

// Version is the RunConfig schema version this package reads and writes. A
// reader refuses any other version with ErrVersion.
const Version = 1

// Well-known paths, keys, ports and environment variables of the contract.
const (
	// Command is the path of the dorylus command in the runtime image.
	Command = "/dorylus"
	// DefaultPath is where pods find run.json.
	DefaultPath = "/etc/dorylus/run.json"
	// ConfigMapKey is the key of run.json in the job's ConfigMap.
	ConfigMapKey = "run.json"
	// MountDir is the folder the ConfigMap is mounted at.
	MountDir = "/etc/dorylus"
	// SecretsDir holds one folder per mounted credentials Secret.
	SecretsDir = "/var/run/secrets/dorylus"
	// CredentialsDir is where the job's own credentials Secret (pkg/pki's
	// files: CA, certificate, key, token) is mounted.
	CredentialsDir = SecretsDir + "/job"
	// DatasetMountPath is where a pvc dataset volume is mounted.
	DatasetMountPath = "/data/dataset"
	// CheckpointMountPath is where a pvc checkpoint volume is mounted.
	CheckpointMountPath = "/data/checkpoint"
	// PartitionsMountPath is where a pvc partitions volume is mounted.
	PartitionsMountPath = "/data/partitions"

	// GraphServerPort is the graph servers' gRPC port.
	GraphServerPort = 5000
	// ParamServerPort is the parameter servers' gRPC port.
	ParamServerPort = 5100
	// FunctionPort is the HTTP port of `dorylus function --listen`.
	FunctionPort = 8080
	// HealthPort is where graph and parameter servers serve their gRPC
	// health alone, in plaintext, for readiness probes (--health-address).
	HealthPort = 5001
	// MetricsPort is where the operator's server pods serve Prometheus metrics
	// (--metrics-address).
	MetricsPort = 9090

	// EnvJobName holds the GNNTrainingJob's name.
	EnvJobName = "DORYLUS_JOB_NAME"
	// EnvNamespace holds the job's namespace.
	EnvNamespace = "DORYLUS_NAMESPACE"
	// EnvPodName holds the pod's own name.
	EnvPodName = "DORYLUS_POD_NAME"
	// EnvPartition holds a graph server's partition id (its ordinal).
	EnvPartition = "DORYLUS_PARTITION"
	// EnvAttempt holds the job's restart count when a server's pod was made (its
	// dorylus.dev/run label): graph servers of different attempts refuse each other.
	EnvAttempt = "DORYLUS_ATTEMPT"
	// EnvPodIP holds a server pod's IP: the servers' default --advertise-address, which
	// functions on the pull data path reach them at.
	EnvPodIP = "DORYLUS_POD_IP"
	// EnvTokenFile is the function's default --token-file: the bearer token
	// its HTTP service requires.
	EnvTokenFile = "DORYLUS_TOKEN_FILE"
)

// Dataset sources.
const (
	SourceBuiltin = "builtin" // a benchmark dataset known to the dorylus command
	SourceS3      = "s3"      // a folder in an S3-compatible bucket
	SourcePVC     = "pvc"     // a folder on the mounted volume
	SourceHTTP    = "http"    // a tar.gz archive over HTTP(S)
)

// Dataset formats: the layouts graph.DetectFormat names. Empty is detected.
const (
	FormatPrepared = "prepared" // the binary output of `dorylus prepare`, whole or in partitions
	FormatText     = "text"     // the plain-text layout of datasets/FORMAT.md
	FormatOGB      = "ogb"      // OGB's node-property-prediction layout
	FormatNumPy    = "numpy"    // NumPy arrays with PyG's names
)

// Tensor backend kinds.
const (
	BackendCPU     = "cpu"
	BackendLambda  = "lambda"
	BackendKnative = "knative"
)

// Model architectures.
const (
	ArchitectureGCN  = "GCN"
	ArchitectureGAT  = "GAT"
	ArchitectureSAGE = "GraphSAGE" // mean aggregator
)

// modelNames are the architectures' names in `dorylus train --model` and a model card.
var modelNames = map[string]string{ArchitectureGCN: "gcn", ArchitectureGAT: "gat", ArchitectureSAGE: "sage"}

// ModelName returns an architecture's name in `dorylus train --model` and a model card (gcn,
// gat, sage), or "" for none.
func ModelName(architecture string) string { return modelNames[architecture] }

// ArchitectureOf returns the architecture a ModelName names, or "" for none.
func ArchitectureOf(name string) string {
	for a, n := range modelNames {
		if n == name {
			return a
		}
	}
	return ""
}

// Lambda data paths.
const (
	DataPathPull   = "pull"
	DataPathInline = "inline"
)

// RunConfig is the resolved configuration of one training run: every default
// applied, every decimal parsed, every address spelled out.
type RunConfig struct {
	// Version is the schema version (Version).
	Version int `json:"version"`
	// Job identifies the GNNTrainingJob.
	Job JobRef `json:"job"`
	// Dataset is where the graph comes from.
	Dataset Dataset `json:"dataset"`
	// Partitions, when set, is where `dorylus partition` writes the
	// dataset's partition files, one per graph server, and where the graph
	// servers read them (ServerDataset).
	Partitions *Location `json:"partitions,omitempty"`
	// Model is the GNN.
	Model Model `json:"model"`
	// Training holds optimisation and pipeline settings.
	Training Training `json:"training"`
	// GraphServers lists the graph servers.
	GraphServers GraphServers `json:"graphServers"`
	// ParameterServers lists the parameter-server shards.
	ParameterServers ParameterServers `json:"parameterServers"`
	// Backend is the tensor backend.
	Backend Backend `json:"backend"`
	// Checkpoint, when set, says where and how often to save weights.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Output, when set, is where the run writes its model and per-vertex
	// outputs at the end (pkg/export), as a new version v-RUN-N beside what
	// it holds, RUN the job's UID (or, without one, its name).
	Output *Location `json:"output,omitempty"`
	// OverwriteOutput lets the run replace a model or predictions of another
	// run at Output (spec.output.overwrite, dorylus train --overwrite); a
	// job's own, written before a restart, it replaces anyway.
	OverwriteOutput bool `json:"overwriteOutput,omitempty"`
	// Inference, when set, runs a saved model on the dataset instead of
	// training it; Output is then required.
	Inference *Inference `json:"inference,omitempty"`
	// Cost, when set, makes graph server 0 price the run as it goes.
	Cost *Cost `json:"cost,omitempty"`
	// Security says how the data plane's links are protected.
	Security Security `json:"security"`
}

// Security says how the data plane's gRPC links are protected: exactly one of
// TLSDir and Insecure.
type Security struct {
	// TLSDir is the folder of the job's credentials (pkg/pki: ca.crt, tls.crt,
	// tls.key; on the pull data path, function.crt and function.key for the
	// descriptors): every gRPC link is mutual TLS chained to the job's CA.
	TLSDir string `json:"tlsDir,omitempty"`
	// Insecure runs the gRPC links in plaintext without authentication, and
	// the function calls without a token: for debugging only.
	Insecure bool `json:"insecure,omitempty"`
}

// JobRef identifies the GNNTrainingJob a run belongs to.
type JobRef struct {
	// Name is the job's name.
	Name string `json:"name"`
	// Namespace is the job's namespace.
	Namespace string `json:"namespace"`
	// UID is the job's UID, to tell apart re-created jobs of one name.
	UID string `json:"uid,omitempty"`
}

// Dataset is where the graph comes from.
type Dataset struct {
	// Source is SourceBuiltin, SourceS3, SourcePVC or SourceHTTP.
	Source string `json:"source"`
	// Format is the layout the dataset must be in (FormatPrepared, FormatText,
	// FormatOGB or FormatNumPy); empty for builtin, and for a dataset whose
	// layout is detected from its files.
	Format string `json:"format,omitempty"`
	// Name is the builtin dataset's name, or an R-MAT generator spec
	// (rmat:nodes=N,edges=E,...).
	Name string `json:"name,omitempty"`
	// Path is the local folder or file of a pvc dataset: under
	// DatasetMountPath in a pod, any local path for dorylus train.
	Path string `json:"path,omitempty"`
	// S3 is the bucket location of an s3 dataset.
	S3 *S3 `json:"s3,omitempty"`
	// URL is the archive of an http dataset.
	URL string `json:"url,omitempty"`
	// SHA256 is the expected hex digest of the http archive, if known.
	SHA256 string `json:"sha256,omitempty"`
}

// ServerDataset is the dataset graph servers read: the partition files of
// Partitions when set, else Dataset.
func (cfg *RunConfig) ServerDataset() Dataset {
	p := cfg.Partitions
	switch {
	case p == nil:
		return cfg.Dataset
	case p.S3 != nil:
		return Dataset{Source: SourceS3, Format: FormatPrepared, S3: p.S3}
	default:
		return Dataset{Source: SourcePVC, Format: FormatPrepared, Path: p.Path}
	}
}

// S3 is a location in an S3-compatible bucket.
type S3 struct {
	// Bucket is the bucket name.
	Bucket string `json:"bucket"`
	// Prefix is the key prefix.
	Prefix string `json:"prefix,omitempty"`
	// Region is the bucket's region; empty means the SDK default.
	Region string `json:"region,omitempty"`
	// Endpoint overrides the endpoint (path-style addressing when set).
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialsDir holds accessKeyID and secretAccessKey files; empty
	// means the SDK's default chain.
	CredentialsDir string `json:"credentialsDir,omitempty"`
}

// Model is the GNN architecture.
type Model struct {
	// Architecture is ArchitectureGCN, ArchitectureGAT or ArchitectureSAGE.
	Architecture string `json:"architecture"`
	// Layers is the number of layers.
	Layers int `json:"layers"`
	// Hidden is the hidden width.
	Hidden int `json:"hidden"`
	// Dropout is the dropout rate in [0, 1).
	Dropout float64 `json:"dropout"`
	// Heads is the GAT head count (0 for GCN).
	Heads int `json:"heads,omitempty"`
}

// Training holds optimisation and pipeline settings.
type Training struct {
	// Epochs is the number of epochs.
	Epochs int `json:"epochs"`
	// LearningRate is Adam's step size.
	LearningRate float64 `json:"learningRate"`
	// WeightDecay is the L2 penalty.
	WeightDecay float64 `json:"weightDecay"`
	// TargetAccuracy, when above 0, stops training once the validation
	// accuracy reaches it.
	TargetAccuracy float64 `json:"targetAccuracy,omitempty"`
	// Staleness is synchronous mode or the asynchronous bound S, on the
	// wire as "sync" (a barrier after every Scatter) and "staleness" (S,
	// 0 with sync).
	Staleness Staleness `json:"-"`
	// EvalEvery evaluates on the validation split every N epochs and after
	// the last; 0 means every epoch.
	EvalEvery int `json:"evalEvery,omitempty"`
	// Patience, above 0, selects by validation as the GAT paper: the result
	// is the last epoch that reached both the best validation accuracy and
	// the lowest validation loss so far, and training stops after this many
	// epochs without either. It needs EvalEvery 0 or 1.
	Patience int `json:"patience,omitempty"`
	// Intervals per graph server; 0 means as many as the backend's
	// concurrency.
	Intervals int `json:"intervals,omitempty"`
	// UpdateEvery is the asynchronous pipeline's update granularity: how many
	// of a graph server's intervals sum their gradients into one weight
	// update; on the wire as "updateEvery", absent for the default, one
	// update per server per epoch.
	UpdateEvery UpdateEvery `json:"-"`
	// Seed seeds initialisation and dropout.
	Seed int64 `json:"seed"`
}

// GraphServers lists the graph servers.
type GraphServers struct {
	// Replicas is the number of graph servers and partitions.
	Replicas int `json:"replicas"`
	// Port is the gRPC port each listens on.
	Port int `json:"port"`
	// Peers[p] is the address (host:port) of the graph server of partition p.
	Peers []string `json:"peers"`
	// DeadAfter is how long a peer may fail its health checks before the
	// run fails naming it; 0 means rpc.DefaultDeadAfter.
	DeadAfter Duration `json:"deadAfter,omitempty"`
}

// ParameterServers lists the parameter-server shards.
type ParameterServers struct {
	// Replicas is the number of shards.
	Replicas int `json:"replicas"`
	// Port is the gRPC port each listens on.
	Port int `json:"port"`
	// Service is the address (host:port) of the Service over all shards.
	Service string `json:"service"`
	// Shards[n] is the address (host:port) of shard n.
	Shards []string `json:"shards"`
}

// Backend is the tensor backend.
type Backend struct {
	// Kind is BackendCPU, BackendLambda or BackendKnative.
	Kind string `json:"kind"`
	// CPU is set for BackendCPU.
	CPU *CPU `json:"cpu,omitempty"`
	// Lambda is set for BackendLambda.
	Lambda *Lambda `json:"lambda,omitempty"`
	// Knative is set for BackendKnative.
	Knative *Knative `json:"knative,omitempty"`
	// Placement is where a task whose remote call costs more than computing it runs:
	// PlacementAuto (empty too) computes it in the graph server, PlacementRemote sends every
	// task to the backend (the cpu backend's injected latency stands for a call).
	Placement string `json:"placement,omitempty"`
}

// Placements of the tensor tasks (Backend.Placement).
const (
	PlacementAuto   = "auto"   // by cost: a task whose call costs more than its compute runs in the graph server
	PlacementRemote = "remote" // every task on the backend
)

// CPU configures the in-process goroutine pool.
type CPU struct {
	// Workers is the pool size; 0 means one per interval and epoch in
	// flight.
	Workers int `json:"workers,omitempty"`
	// InjectLatency is added to every tensor task (the latency-hiding
	// benchmark).
	InjectLatency Duration `json:"injectLatency,omitempty"`
	// Wire sends every task through the remote backends' wire encoding.
	Wire bool `json:"wire,omitempty"`
}

// Lambda configures AWS Lambda invocations.
type Lambda struct {
	// FunctionName is the function's name or ARN.
	FunctionName string `json:"functionName"`
	// Region is the AWS region.
	Region string `json:"region"`
	// MemoryMB is the function's memory, for the cost model.
	MemoryMB int `json:"memoryMB"`
	// MaxConcurrency caps concurrent invocations per graph server.
	MaxConcurrency int `json:"maxConcurrency"`
	// DataPath is DataPathPull or DataPathInline.
	DataPath string `json:"dataPath"`
	// Endpoint overrides the Lambda endpoint: one, or several separated by
	// commas (emulators, one per concurrent call).
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialsDir holds accessKeyID and secretAccessKey files; empty
	// means the SDK's default chain (IRSA).
	CredentialsDir string `json:"credentialsDir,omitempty"`
	// Qualifier is the version or alias to invoke; empty means $LATEST.
	Qualifier string `json:"qualifier,omitempty"`
	// Calls tunes the calls; nil takes the defaults.
	Calls *Calls `json:"calls,omitempty"`
}

// Knative configures HTTP calls to a Knative Service.
type Knative struct {
	// URL is the Service's address.
	URL string `json:"url"`
	// MaxConcurrency caps concurrent requests per graph server.
	MaxConcurrency int `json:"maxConcurrency"`
	// Managed is true when the operator created the Service.
	Managed bool `json:"managed,omitempty"`
	// DataPath is DataPathPull or DataPathInline; empty means inline.
	DataPath string `json:"dataPath,omitempty"`
	// Calls tunes the calls; nil takes the defaults.
	Calls *Calls `json:"calls,omitempty"`
	// TokenFile holds the bearer token the function requires; required
	// unless Security.Insecure.
	TokenFile string `json:"tokenFile,omitempty"`
}

// Calls tunes a remote backend's calls (pkg/dispatch/remote); zero fields
// take its defaults.
type Calls struct {
	// EndpointConcurrency is how many calls one endpoint serves at once;
	// 0 means any (with Lambda.Endpoint set: MaxConcurrency). Endpoints
	// that serve a limited number are dealt out among the graph servers.
	EndpointConcurrency int `json:"endpointConcurrency,omitempty"`
	// Timeout limits one call; 0 means 60s.
	Timeout Duration `json:"timeout,omitempty"`
	// StragglerFactor relaunches a call slower than this many times the
	// median of its kind; 0 means 5, negative never.
	StragglerFactor float64 `json:"stragglerFactor,omitempty"`
	// StragglerFloor is the least time before a relaunch; 0 means 500ms.
	StragglerFloor Duration `json:"stragglerFloor,omitempty"`
}

// RunFolder is the folder of run id's checkpoints under a checkpoint destination.
func RunFolder(id string) string { return "run-" + id }

// Checkpoint says where and how often to save weights.
type Checkpoint struct {
	// IntervalEpochs is the number of epochs between checkpoints; with a
	// staleness bound, the graph servers drain the pipeline every
	// IntervalEpochs epochs, where the parameter servers take them.
	IntervalEpochs int `json:"intervalEpochs"`
	// RunID is the run the checkpoints belong to: the job's UID, or the id a
	// dorylus train run drew. Path or S3 is that run's own folder
	// (RunFolder(RunID) under the destination), and every checkpoint's
	// manifest names it. Empty: checkpoints written before runs had ids,
	// flat in the destination.
	RunID string `json:"runID,omitempty"`
	// Path is the local folder of a pvc destination.
	Path string `json:"path,omitempty"`
	// S3 is the bucket location of an s3 destination.
	S3 *S3 `json:"s3,omitempty"`
	// Keep is how many checkpoints to keep; 0 means all.
	Keep int `json:"keep,omitempty"`
	// Fresh starts the run from epoch 1 whatever the destination holds
	// (dorylus train without --resume); a pod otherwise resumes from the
	// newest checkpoint.
	Fresh bool `json:"fresh,omitempty"`
}
