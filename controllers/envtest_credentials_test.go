package controllers

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// TestJobCredentials creates a suspended job with a managed Knative function: no credentials
// Secret while it never ran; on resume the Secret holds a CA, a certificate it signed for
// pki.ServerName and a token, field by field; the run config points at its mount; graph
// servers mount the TLS keys and the token, parameter servers the TLS keys only, the function
// the token only, each read-only. Suspended and resumed again, the job gets a new CA,
// certificate and token, and its pod templates name the new period.
func TestJobCredentials(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "sec", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.Suspend = ptr.To(true)
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			Service: &dorylusv1alpha1.KnativeServiceTemplate{MaxScale: 2}}}
	}))
	waitCondition(t, ns, "sec", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
	var s corev1.Secret
	if err := getObj(t, ns, "sec-credentials", &s); !apierrors.IsNotFound(err) {
		t.Fatalf("credentials of a job that never ran: %v, want NotFound", err)
	}

	resume := func() (*dorylusv1alpha1.GNNTrainingJob, corev1.Secret) {
		t.Helper()
		if err := updateJob(t, ns, "sec", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) }); err != nil {
			t.Fatal(err)
		}
		job := waitCondition(t, ns, "sec", dorylusv1alpha1.ConditionSuspended, metav1.ConditionFalse, dorylusv1alpha1.ReasonResumed)
		period := credentialsPeriod(job.Status.StartTime, job.Status.Restarts)
		var s corev1.Secret
		eventually(t, "credentials of the period", func() error {
			if err := getObj(t, ns, "sec-credentials", &s); err != nil {
				return err
			}
			if got := s.Annotations[AnnotationCredentialsPeriod]; got != period {
				return fmt.Errorf("credentials of period %q, want %q", got, period)
			}
			return nil
		})
		checkCredentials(t, &s, job)
		checkCredentialMounts(t, ns, period)
		return job, s
	}
	_, first := resume()

	cfg := runConfigOf(t, ns, "sec")
	if cfg.Security != (jobconfig.Security{TLSDir: "/var/run/secrets/dorylus/job"}) || cfg.Backend.Knative.TokenFile != "/var/run/secrets/dorylus/job/token" {
		t.Errorf("run config security %+v, knative token file %q", cfg.Security, cfg.Backend.Knative.TokenFile)
	}

	if err := updateJob(t, ns, "sec", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "sec", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
	fakeClock.Step(10 * time.Minute)
	_, second := resume()
	for _, k := range []string{pki.CAFile, pki.CertFile, pki.KeyFile, pki.TokenFile, pki.FunctionCertFile, pki.FunctionKeyFile, pki.FunctionCAFile, pki.FunctionCAKeyFile} {
		if string(first.Data[k]) == string(second.Data[k]) {
			t.Errorf("%s kept across a resume", k)
		}
	}
	if first.UID != second.UID {
		t.Errorf("the Secret was replaced (%s, then %s), want it updated in place", first.UID, second.UID)
	}
}

// checkCredentials checks the Secret field by field: the job's own, type kubernetes.io/tls,
// exactly the eight keys, a leaf for pki.ServerName, a function certificate and a function
// issuer that its CA signed, a 64-digit token.
func checkCredentials(t *testing.T, s *corev1.Secret, job *dorylusv1alpha1.GNNTrainingJob) {
	t.Helper()
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("type %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	if refs := s.OwnerReferences; len(refs) != 1 || refs[0].UID != job.UID || !*refs[0].Controller {
		t.Errorf("owners %+v", refs)
	}
	var keys []string
	for k := range s.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"ca.crt", "function-ca.crt", "function-ca.key", "function.crt", "function.key", "tls.crt", "tls.key", "token"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	parse := func(key string) *x509.Certificate {
		b, _ := pem.Decode(s.Data[key])
		if b == nil {
			t.Fatalf("%s holds no PEM", key)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return c
	}
	ca, leaf := parse(pki.CAFile), parse(pki.CertFile)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if !ca.IsCA || leaf.IsCA || leaf.Subject.CommonName != job.Namespace+"/"+job.Name {
		t.Errorf("CA %v, leaf CA %v, leaf CN %q", ca.IsCA, leaf.IsCA, leaf.Subject.CommonName)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: pki.ServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("leaf: %v", err)
	}
	if _, err := (&pki.Bundle{CA: s.Data[pki.CAFile], Cert: s.Data[pki.CertFile], Key: s.Data[pki.KeyFile]}).Credentials(); err != nil {
		t.Errorf("key pair: %v", err)
	}
	if _, err := (&pki.Bundle{CA: s.Data[pki.CAFile], Cert: s.Data[pki.FunctionCertFile], Key: s.Data[pki.FunctionKeyFile]}).Credentials(); err != nil {
		t.Errorf("function certificate: %v", err)
	}
	if fn := parse(pki.FunctionCertFile); fn.CheckSignatureFrom(ca) != nil || !slices.Equal(fn.DNSNames, []string{pki.FunctionServerName}) {
		t.Errorf("function certificate: DNS names %v, want %s, signed by the job's CA", fn.DNSNames, pki.FunctionServerName)
	}
	if _, err := (&pki.Bundle{CA: s.Data[pki.CAFile], FunctionCA: s.Data[pki.FunctionCAFile], FunctionCAKey: s.Data[pki.FunctionCAKeyFile]}).Issuer(); err != nil {
		t.Errorf("function issuer: %v", err)
	}
	if len(s.Data[pki.TokenFile]) != 64 {
		t.Errorf("token of %d bytes, want 64 hex digits", len(s.Data[pki.TokenFile]))
	}
}

// checkCredentialMounts checks which keys of the credentials each pod template mounts, where,
// and that it names period.
func checkCredentialMounts(t *testing.T, ns, period string) {
	t.Helper()
	tlsOnly := []string{"ca.crt", "tls.crt", "tls.key"}
	var sts appsv1.StatefulSet
	var dep appsv1.Deployment
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(KnativeServiceGVK)
	eventually(t, "pod templates of the period", func() error {
		if err := getObj(t, ns, "sec-gs", &sts); err != nil {
			return err
		}
		if err := getObj(t, ns, "sec-ps-0", &dep); err != nil {
			return err
		}
		if err := getObj(t, ns, "sec-fn", ks); err != nil {
			return err
		}
		fn, _, _ := unstructured.NestedString(ks.Object, "spec", "template", "metadata", "annotations", AnnotationCredentialsPeriod)
		for name, got := range map[string]string{"graph servers": sts.Spec.Template.Annotations[AnnotationCredentialsPeriod],
			"parameter servers": dep.Spec.Template.Annotations[AnnotationCredentialsPeriod], "function": fn} {
			if got != period {
				return fmt.Errorf("%s' template names period %q, want %q", name, got, period)
			}
		}
		return nil
	})
	var fnPod corev1.PodTemplateSpec
	tmpl, _, _ := unstructured.NestedMap(ks.Object, "spec", "template")
	data, _ := json.Marshal(tmpl)
	if err := json.Unmarshal(data, &fnPod); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		spec *corev1.PodSpec
		keys []string
	}{
		{"graph servers", &sts.Spec.Template.Spec, append(tlsOnly, "token")},
		{"parameter servers", &dep.Spec.Template.Spec, tlsOnly},
		{"function", &fnPod.Spec, []string{"token"}},
	} {
		var found []string
		for _, v := range c.spec.Volumes {
			if v.Secret == nil || v.Secret.SecretName != "sec-credentials" {
				continue
			}
			for _, it := range v.Secret.Items {
				found = append(found, it.Key)
			}
			var mounts []corev1.VolumeMount
			for _, m := range c.spec.Containers[0].VolumeMounts {
				if m.Name == v.Name {
					mounts = append(mounts, m)
				}
			}
			if len(mounts) != 1 || mounts[0].MountPath != "/var/run/secrets/dorylus/job" || !mounts[0].ReadOnly {
				t.Errorf("%s mount the credentials %+v, want once read-only at /var/run/secrets/dorylus/job", c.name, mounts)
			}
		}
		if !slices.Equal(found, c.keys) {
			t.Errorf("%s mount credentials %v, want %v", c.name, found, c.keys)
		}
	}
}
