// Package jobstatus is the client graph server 0 uses to report training
// progress into its GNNTrainingJob's status.
//
// Report writes status.progress only, with server-side apply under the field
// manager "dorylus-graph-server", so the operator (which owns the conditions
// and every other status field under its own manager) and the reporter never
// overwrite each other. The pod's ServiceAccount token is enough: the Role the
// operator creates for the job allows get and patch on gnntrainingjobs/status
// of that one job only (resourceNames).
//
// Each report describes the whole progress: a field left unset in a later
// report is removed. Numbers must be finite and non-negative; a NaN or
// infinite loss or accuracy is dropped and, unless the caller gave one, turned
// into a FailureMessage naming the epoch, which makes the operator fail the
// job with reason TrainingError instead of training on garbage.
package jobstatus
