// Package jobconfig is the contract between the operator and the data plane:
// the resolved run configuration of one GNNTrainingJob, which the operator
// writes as JSON into the job's ConfigMap and every pod reads at start-up.
//
// # Files and environment
//
// The ConfigMap <job>-config holds one key, run.json (ConfigMapKey), mounted
// read-only at /etc/dorylus/run.json (DefaultPath). Load reads and validates
// it; a pod must refuse to start on a validation error. Every server pod also
// gets, through the downward API:
//
//	DORYLUS_JOB_NAME    the GNNTrainingJob's name (EnvJobName)
//	DORYLUS_NAMESPACE   its namespace (EnvNamespace)
//	DORYLUS_POD_NAME    the pod's name (EnvPodName)
//	DORYLUS_PARTITION   graph servers only: the StatefulSet ordinal, from the
//	                    apps.kubernetes.io/pod-index label (EnvPartition)
//
// # Commands
//
// The runtime image holds the dorylus command at /dorylus (Command); the
// operator runs it as:
//
//	dorylus graph-server --config /etc/dorylus/run.json --partition $(DORYLUS_PARTITION)
//	dorylus param-server --config /etc/dorylus/run.json --shard <n>
//	dorylus function --listen :8080 --token-file /var/run/secrets/dorylus/job/token   (managed Knative Service only)
//
// A Lambda function runs `dorylus function` as its handler; the user deploys
// it, the operator only invokes it by name.
//
// The same file, written by `dorylus train --graph-servers` into a temporary
// folder, runs its server processes on one machine: there the dataset is a
// pvc source naming a local folder, the job has no UID (no status reports),
// and the optional fields (Training.EvalEvery and Patience,
// GraphServers.DeadAfter, CPU.InjectLatency, Calls, Checkpoint.Keep and
// Fresh) carry the command's flags. Training.Staleness is written as the two
// fields "sync" and "staleness"; its default, "sync" (DefaultStaleness), is
// the CRD's and the command's.
//
// # Graph servers
//
// Pod <job>-gs-<p> (a StatefulSet with parallel pod management) holds
// partition p of GraphServers.Replicas. It serves gRPC on GraphServerPort
// (5000) on all interfaces, mutual TLS with the job's credentials
// (Security.TLSDir, the Secret <job>-credentials-<digest> mounted at CredentialsDir),
// including the standard grpc.health.v1.Health service, which it also serves
// alone in plaintext on HealthPort (5001): the pod's readiness probe is a gRPC
// probe on that port, and it reports SERVING once the partition is loaded. It does not wait for its
// peers: they find each other through health checks of their own, and a
// readiness that waited on peers' readiness would deadlock a parallel start.
// Peers are addressed through the headless Service <job>-gs, which
// publishes not-ready addresses, as GraphServers.Peers[q] =
// "<job>-gs-<q>.<job>-gs.<ns>.svc:5000".
//
// Graph server 0 is the leader: after every epoch it reports progress into
// the job's status (status.progress only) with package jobstatus, which uses
// the pod's ServiceAccount token; the ServiceAccount's Role allows exactly
// get and patch on gnntrainingjobs/status of its own job. After the last
// epoch (or on reaching Training.TargetAccuracy) the leader reports the final
// progress; the operator then marks the job Succeeded and scales every server
// to zero, so servers stay up (idle) until then. An unrecoverable error (a
// NaN loss, say) is reported as Progress.FailureMessage, naming the epoch,
// layer and task; the operator fails the job. A process that exits restarts
// its container, and restarts count against spec.runPolicy.backoffLimit.
//
// # Parameter servers
//
// Shard n runs in Deployment <job>-ps-<n> (one replica, Recreate strategy)
// and serves gRPC on ParamServerPort (5100) with grpc.health.v1.Health. Its
// pod has hostname <job>-ps-<n> under the headless Service <job>-ps, so it is
// addressed as ParameterServers.Shards[n] =
// "<job>-ps-<n>.<job>-ps.<ns>.svc:5100"; ParameterServers.Service is the
// Service address "<job>-ps.<ns>.svc:5100" for callers that do not care which
// shard answers. Parameter servers write checkpoints every
// Checkpoint.IntervalEpochs epochs and load the newest one at start-up, so a
// resumed job continues where it stopped.
//
// # Tensor backends
//
// Backend.Kind is "cpu" (a goroutine pool in each graph server), "lambda"
// (AWS Lambda Invoke of Backend.Lambda.FunctionName) or "knative" (HTTP POST
// to Backend.Knative.URL; for a managed Service the operator creates
// serving.knative.dev/v1 Service <job>-fn, whose container runs `dorylus
// function --listen :8080`, and the URL is
// "http://<job>-fn.<ns>.svc.cluster.local").
//
// Lambda.MaxConcurrency and Knative.MaxConcurrency cap the calls in flight of
// each graph server, and Training.Intervals 0 means that many intervals.
// Lambda.Endpoint overrides the service endpoint: a VPC endpoint, or an
// aws-lambda-rie emulator, which serves one invocation at a time (of the
// function named "function") and so needs MaxConcurrency 1; a graph server
// sends an overridden endpoint at most MaxConcurrency calls at once, straggler
// relaunches included. Lambda.DataPath inline sends the tensors in the
// requests, cut by rows under Lambda's 6 MB payload limit; pull sends a small
// descriptor, and the function fetches the interval's inputs from its graph
// server and the weights by version from the parameter server over gRPC, at
// the addresses they advertise (graph-server and param-server
// --advertise-address, default the pod IP), so both must be reachable from the
// function (the same as dorylus train --data-path pull).
//
// # Credentials
//
// Credentials never appear here. A Secret named by the spec is mounted
// read-only at /var/run/secrets/dorylus/<lambda|dataset|checkpoint> with the
// files accessKeyID, secretAccessKey and optionally sessionToken; the
// corresponding CredentialsDir field names that folder. An empty
// CredentialsDir means the SDK's default chain: the pod's ServiceAccount
// identity (IRSA, eks.amazonaws.com/role-arn on <job>-runtime) or the node's.
//
// # Volumes
//
// A pvc dataset is mounted read-only at /data/dataset (Dataset.Path is the
// full path of the folder in it, under /data/dataset); a pvc checkpoint volume is mounted read-write at
// /data/checkpoint on the parameter servers (Checkpoint.Path). The root
// file system is read-only; /tmp is a writable emptyDir (downloads of s3 and
// http datasets go there). A builtin
// dataset is found by the dorylus command itself, by Dataset.Name.
package jobconfig
