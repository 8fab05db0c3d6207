package controllers

import (
	"context"
	"fmt"
	"path"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// Credentials policy: while a job runs, its data plane uses credentials the
// operator issues (pkg/pki) into the Secret <job>-credentials: a CA of the
// job's own, one certificate every server presents, the HTTP function's
// certificate (it serves HTTPS and pulls with it), the function issuer with
// which the graph servers of a Lambda pull job certify the keys their
// functions make (no descriptor carries a private key), and the HTTP
// function's bearer token. They belong to one running period, named by
// status.startTime (set at the first start, reset at every resume) and
// status.restarts (restarts.go): a resumed or restarted job gets new ones,
// which no longer trust the old CA, whose key was never stored. Pod templates carry the period, so that servers never mix the
// credentials of two periods. Each pod mounts only the keys it uses; the
// operator reads the Secret uncached and watches no Secrets.

// AnnotationCredentialsPeriod on the credentials Secret and on the pod
// templates that mount it names the running period they belong to.
const AnnotationCredentialsPeriod = "dorylus.dev/credentials-period"

// tlsKeys are the credentials Secret's keys of mutual TLS.
var tlsKeys = []string{pki.CAFile, pki.CertFile, pki.KeyFile}

// credentialsPeriod names the running period that began at start, after
// restarts restarts ("" before the first).
func credentialsPeriod(start *metav1.Time, restarts int32) string {
	if start == nil {
		return ""
	}
	return fmt.Sprintf("%s/run-%d", start.UTC().Format(time.RFC3339), restarts)
}

// buildCredentialsSecret is the job's credentials Secret holding b, issued for
// period: type kubernetes.io/tls, plus ca.crt and token.
func buildCredentialsSecret(job *dorylusv1alpha1.GNNTrainingJob, period string, b *pki.Bundle) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(credentialsSecretName(job), job.Namespace).
		WithLabels(childLabels(job, RoleRuntime)).
		WithAnnotations(map[string]string{AnnotationCredentialsPeriod: period}).
		WithOwnerReferences(ownerReference(job)).
		WithType(corev1.SecretTypeTLS).
		WithData(b.Files())
}

// credentialsVolume mounts keys of the job's credentials Secret read-only at
// jobconfig.CredentialsDir.
func credentialsVolume(job *dorylusv1alpha1.GNNTrainingJob, keys ...string) (*corev1ac.VolumeApplyConfiguration, *corev1ac.VolumeMountApplyConfiguration) {
	src := corev1ac.SecretVolumeSource().WithSecretName(credentialsSecretName(job))
	for _, k := range keys {
		src.WithItems(corev1ac.KeyToPath().WithKey(k).WithPath(k))
	}
	return corev1ac.Volume().WithName(volumeCredentials).WithSecret(src),
		corev1ac.VolumeMount().WithName(volumeCredentials).WithMountPath(jobconfig.CredentialsDir).WithReadOnly(true)
}

// credentialsFile is where a pod finds key of the job's credentials.
func credentialsFile(key string) string { return path.Join(jobconfig.CredentialsDir, key) }

// ensureCredentials issues new credentials into the job's Secret unless it
// already holds those of period. The cached graph-server StatefulSet naming
// period answers without a request (it is written only after the
// credentials of its period); otherwise the Secret is read uncached. A Secret
// of that name the job does not own is left alone and reported.
func (r *GNNTrainingJobReconciler) ensureCredentials(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, period string) error {
	var sts appsv1.StatefulSet
	err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: graphServerName(job)}, &sts)
	if err == nil && ownedBy(sts.OwnerReferences, job) && sts.Spec.Template.Annotations[AnnotationCredentialsPeriod] == period {
		return nil
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	var s corev1.Secret
	err = reader.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: credentialsSecretName(job)}, &s)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read credentials: %w", err)
	case !ownedBy(s.OwnerReferences, job):
		return fmt.Errorf("secret %s exists and is not the job's: the job's credentials need that name", s.Name)
	case s.Annotations[AnnotationCredentialsPeriod] == period:
		return nil
	}
	b, err := pki.Issue(job.Namespace + "/" + job.Name)
	if err != nil {
		return fmt.Errorf("issue credentials: %w", err)
	}
	if err := r.Apply(ctx, buildCredentialsSecret(job, period, b), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	return nil
}
