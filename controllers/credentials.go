package controllers

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// Credentials policy: while a job runs, its data plane uses credentials the
// operator issues (pkg/pki): a CA of the job's own, one certificate every
// server presents, the HTTP function's certificate (it serves HTTPS and pulls
// with it), the function issuer with which the graph servers of a Lambda pull
// job certify the keys their functions make (no descriptor carries a private
// key), and the HTTP function's bearer token. They belong to one running
// period, named by status.startTime (set at the first start, reset at every
// resume) and status.restarts (restarts.go): a resumed or restarted job gets
// new ones, which no longer trust the old CA, whose key was never stored.
//
// The operator never reads a Secret: each period's credentials go into an
// immutable Secret of their own, <job>-credentials-<digest of the job's UID
// and the period> (credentialsSecretName), which the operator creates — it
// already exists (AlreadyExists) only if an earlier reconcile issued it — and
// which the pod templates of the period name, with the period in an
// annotation, so that servers never mix the credentials of two periods. The
// graph-server StatefulSet, read from the cache, is the record of the period
// the pods use: it is written only after its period's Secret exists, and once
// a new period's is, the previous period's Secret (named by the StatefulSet's
// annotation) is deleted. Each pod mounts only the keys it uses. A function of
// the job's users at an https:// url mounts <job>-credentials
// (functionCredentialsName), the current period's function certificate:
// written (the previous period's deleted first) right after the period's
// Secret is created, which is undone if that fails. Only a crash between the
// two leaves it with the previous period's, which the graph servers refuse:
// they fail, and the job restarts on new credentials. The operator needs
// nothing of them afterwards: it keeps no key and no certificate.

// AnnotationCredentialsPeriod on the credentials Secrets and on the pod
// templates that mount them names the running period they belong to.
const AnnotationCredentialsPeriod = "dorylus.dev/credentials-period"

// tlsKeys are the credentials Secret's keys of mutual TLS.
var tlsKeys = []string{pki.CAFile, pki.CertFile, pki.KeyFile}

// functionKeys are the keys of the credentials of a function at a url
// (dorylus function --credentials-dir).
var functionKeys = []string{pki.CAFile, pki.FunctionCertFile, pki.FunctionKeyFile}

// credentialsPeriod names the running period that began at start, after
// restarts restarts ("" before the first).
func credentialsPeriod(start *metav1.Time, restarts int32) string {
	if start == nil {
		return ""
	}
	return fmt.Sprintf("%s/run-%d", start.UTC().Format(time.RFC3339), restarts)
}

// buildCredentialsSecret is the job's immutable credentials Secret of period
// holding b: type kubernetes.io/tls, plus ca.crt, token and the function's.
func buildCredentialsSecret(job *dorylusv1alpha1.GNNTrainingJob, period string, b *pki.Bundle) *corev1.Secret {
	return credentialsSecret(job, credentialsSecretName(job, period), period, corev1.SecretTypeTLS, b.Files(), true)
}

// buildFunctionCredentialsSecret is the Secret <job>-credentials of period
// that a function at an https:// url mounts: the keys functionKeys of b. It is
// mutable, so that the kubelet updates the function's mount when it is
// replaced.
func buildFunctionCredentialsSecret(job *dorylusv1alpha1.GNNTrainingJob, period string, b *pki.Bundle) *corev1.Secret {
	files := b.Files()
	data := map[string][]byte{}
	for _, k := range functionKeys {
		data[k] = files[k]
	}
	return credentialsSecret(job, functionCredentialsName(job), period, corev1.SecretTypeOpaque, data, false)
}

// credentialsSecret is a Secret of the job's credentials of period.
func credentialsSecret(job *dorylusv1alpha1.GNNTrainingJob, name, period string, typ corev1.SecretType, data map[string][]byte, immutable bool) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: childLabels(job, RoleRuntime),
			Annotations: map[string]string{AnnotationCredentialsPeriod: period}},
		Type: typ, Data: data,
	}
	if immutable {
		s.Immutable = ptr.To(true)
	}
	s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, dorylusv1alpha1.GroupVersion.WithKind("GNNTrainingJob"))}
	return s
}

// userFunctionTLS reports whether the job calls a function of its users at an
// https:// url, which mounts functionCredentialsName.
func userFunctionTLS(job *dorylusv1alpha1.GNNTrainingJob) bool {
	k := job.Spec.Backend().Knative
	return k != nil && k.Service == nil && strings.HasPrefix(k.URL, "https://")
}

// credentialsVolume mounts keys of the job's credentials Secret of period
// read-only at jobconfig.CredentialsDir.
func credentialsVolume(job *dorylusv1alpha1.GNNTrainingJob, period string, keys ...string) (*corev1ac.VolumeApplyConfiguration, *corev1ac.VolumeMountApplyConfiguration) {
	src := corev1ac.SecretVolumeSource().WithSecretName(credentialsSecretName(job, period))
	for _, k := range keys {
		src.WithItems(corev1ac.KeyToPath().WithKey(k).WithPath(k))
	}
	return corev1ac.Volume().WithName(volumeCredentials).WithSecret(src),
		corev1ac.VolumeMount().WithName(volumeCredentials).WithMountPath(jobconfig.CredentialsDir).WithReadOnly(true)
}

// credentialsFile is where a pod finds key of the job's credentials.
func credentialsFile(key string) string { return path.Join(jobconfig.CredentialsDir, key) }

// ensureCredentials makes sure the credentials of period exist before the
// pods of period are written: nothing to do when the cached graph-server
// StatefulSet already names period; else it creates the period's Secret
// (AlreadyExists: an earlier reconcile did), then, for a function of the
// job's users, <job>-credentials from the same keys, and deletes the Secret of
// the period the StatefulSet names. It reads no Secret.
func (r *GNNTrainingJobReconciler) ensureCredentials(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, period string) error {
	var sts appsv1.StatefulSet
	prev := ""
	switch err := r.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: graphServerName(job)}, &sts); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read the graph servers' credentials period: %w", err)
	case ownedBy(sts.OwnerReferences, job):
		prev = sts.Spec.Template.Annotations[AnnotationCredentialsPeriod]
	}
	if prev == period {
		return nil
	}
	b, err := pki.Issue(job.Namespace + "/" + job.Name)
	if err != nil {
		return fmt.Errorf("issue credentials: %w", err)
	}
	s := buildCredentialsSecret(job, period, b)
	switch err := r.Create(ctx, s, client.FieldOwner(FieldOwner)); {
	case apierrors.IsAlreadyExists(err): // issued by an earlier reconcile
	case err != nil:
		return fmt.Errorf("write credentials: %w", err)
	case userFunctionTLS(job):
		if err := r.writeFunctionCredentials(ctx, job, period, b, prev != ""); err != nil {
			// Issue the period again at the next try, for both.
			uid := s.UID
			return errors.Join(err, client.IgnoreNotFound(r.Delete(ctx, s, client.Preconditions{UID: &uid})))
		}
	}
	if prev == "" {
		return nil
	}
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: credentialsSecretName(job, prev)}}
	if err := client.IgnoreNotFound(r.Delete(ctx, old)); err != nil {
		return fmt.Errorf("delete the credentials of period %s: %w", prev, err)
	}
	return nil
}

// writeFunctionCredentials writes <job>-credentials of period from b, after
// deleting the previous period's when replace. At the job's first period one
// of that name is not the job's: it is left alone and reported.
func (r *GNNTrainingJobReconciler) writeFunctionCredentials(ctx context.Context, job *dorylusv1alpha1.GNNTrainingJob, period string, b *pki.Bundle, replace bool) error {
	s := buildFunctionCredentialsSecret(job, period, b)
	if replace {
		old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
		if err := client.IgnoreNotFound(r.Delete(ctx, old)); err != nil {
			return fmt.Errorf("delete %s: %w", s.Name, err)
		}
	}
	switch err := r.Create(ctx, s, client.FieldOwner(FieldOwner)); {
	case apierrors.IsAlreadyExists(err) && !replace:
		return fmt.Errorf("secret %s exists and is not the job's: the function at %s mounts the job's credentials under that name", s.Name, job.Spec.Backend().Knative.URL)
	case err != nil:
		return fmt.Errorf("write %s: %w", s.Name, err)
	}
	return nil
}
