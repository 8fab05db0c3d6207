package jobstatus

import "os"

// Target returns the GNNTrainingJob a process of a run reports into: the one the downward API
// names ($DORYLUS_NAMESPACE, $DORYLUS_JOB_NAME), else namespace/name (its run config's); ok is
// false outside a job.
func Target(namespace, name string) (string, string, bool) {
	if ns, n := os.Getenv(EnvNamespace), os.Getenv(EnvJobName); ns != "" && n != "" {
		namespace, name = ns, n
	}
	return namespace, name, namespace != "" && name != ""
}
