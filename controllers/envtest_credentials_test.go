package controllers

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// TestJobCredentials creates a suspended job with a managed Knative function: no credentials
// Secret while it never ran; on resume one immutable Secret <job>-credentials-<digest> of the
// period holds a CA, a certificate it signed for pki.ServerName and a token, field by field;
// the run config points at its mount; graph servers mount the TLS keys and the token,
// parameter servers the TLS keys only, the function the token only, each read-only, from that
// Secret. Suspended and resumed again, the job gets a new Secret of the new period with a new
// CA, certificate and token, its pod templates name it, and the first period's is deleted.
func TestJobCredentials(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "sec", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.Suspend = ptr.To(true)
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			Service: &dorylusv1alpha1.KnativeServiceTemplate{MaxScale: 2}}}
	}))
	waitCondition(t, ns, "sec", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
	if s := jobSecrets(t, ns, "sec"); len(s) != 0 {
		t.Fatalf("credentials of a job that never ran: %d Secrets, want none", len(s))
	}

	resume := func() (*dorylusv1alpha1.GNNTrainingJob, corev1.Secret) {
		t.Helper()
		if err := updateJob(t, ns, "sec", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) }); err != nil {
			t.Fatal(err)
		}
		job := waitCondition(t, ns, "sec", dorylusv1alpha1.ConditionSuspended, metav1.ConditionFalse, dorylusv1alpha1.ReasonResumed)
		period := credentialsPeriod(job.Status.StartTime, job.Status.Restarts)
		var s corev1.Secret
		eventually(t, "credentials of the period alone", func() error {
			all := jobSecrets(t, ns, "sec")
			if len(all) != 1 {
				return fmt.Errorf("%d Secrets of the job, want 1", len(all))
			}
			s = all[0]
			if got := s.Annotations[AnnotationCredentialsPeriod]; got != period {
				return fmt.Errorf("credentials of period %q, want %q", got, period)
			}
			return nil
		})
		if !strings.HasPrefix(s.Name, "sec-credentials-") || len(s.Name) != len("sec-credentials-")+10 || s.Immutable == nil || !*s.Immutable {
			t.Errorf("Secret %s, immutable %v: want sec-credentials-<10 hex digits>, immutable", s.Name, s.Immutable)
		}
		checkCredentials(t, &s, job)
		checkCredentialMounts(t, ns, period, s.Name)
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
	if first.Name == second.Name {
		t.Errorf("the second period's credentials are in the first's Secret %s, want a new one", first.Name)
	}
	if err := getObj(t, ns, first.Name, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the first period's Secret %s: %v, want it deleted", first.Name, err)
	}
}

// TestUserFunctionCredentials: a job calling a function of its users at an https:// url
// (which mounts <job>-credentials, as test/e2e's TestCiteseerGATKnative does) gets, beside the
// period's Secret, <job>-credentials with exactly ca.crt, function.crt and function.key of
// that period, mutable so that the kubelet updates the function's mount; resumed, the job's
// <job>-credentials holds the new period's keys. A job whose <job>-credentials is a Secret of
// its users leaves it alone and says so in its Created condition, its graph servers at zero.
func TestUserFunctionCredentials(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "url", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			URL: "https://fn.default.svc.cluster.local:8080/", TokenSecretRef: &corev1.LocalObjectReference{Name: "token"}}}
	}))
	check := func() corev1.Secret {
		t.Helper()
		var fn, period corev1.Secret
		eventually(t, "the function's credentials of the period", func() error {
			job := getJob(t, ns, "url")
			p := credentialsPeriod(job.Status.StartTime, job.Status.Restarts)
			if job.Status.StartTime == nil {
				return fmt.Errorf("not started")
			}
			var all []corev1.Secret
			for _, s := range jobSecrets(t, ns, "url") {
				if s.Name != "url-credentials" {
					all = append(all, s)
				}
			}
			if err := getObj(t, ns, "url-credentials", &fn); err != nil {
				return err
			}
			if len(all) != 1 || all[0].Annotations[AnnotationCredentialsPeriod] != p || fn.Annotations[AnnotationCredentialsPeriod] != p {
				return fmt.Errorf("%d period Secrets, function credentials of %q, want 1 and %q", len(all), fn.Annotations[AnnotationCredentialsPeriod], p)
			}
			period = all[0]
			return nil
		})
		var keys []string
		for k, v := range fn.Data {
			keys = append(keys, k)
			if string(v) != string(period.Data[k]) {
				t.Errorf("%s of url-credentials differs from the period's %s", k, period.Name)
			}
		}
		slices.Sort(keys)
		if want := []string{"ca.crt", "function.crt", "function.key"}; !slices.Equal(keys, want) || (fn.Immutable != nil && *fn.Immutable) {
			t.Errorf("url-credentials keys %v, immutable %v; want %v, mutable", keys, fn.Immutable, want)
		}
		return fn
	}
	first := check()
	if err := updateJob(t, ns, "url", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "url", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
	fakeClock.Step(10 * time.Minute)
	if err := updateJob(t, ns, "url", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) }); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "url", dorylusv1alpha1.ConditionSuspended, metav1.ConditionFalse, dorylusv1alpha1.ReasonResumed)
	if second := check(); string(second.Data[pki.FunctionCertFile]) == string(first.Data[pki.FunctionCertFile]) {
		t.Error("url-credentials kept the first period's function certificate across a resume")
	}

	// A Secret of that name that is not the job's is left alone, and the job says why.
	if err := k8sClient.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-credentials"},
		StringData: map[string]string{"users": "data"}}); err != nil {
		t.Fatal(err)
	}
	createJob(t, userJob(ns, "taken", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			URL: "https://fn.default.svc.cluster.local:8080/", TokenSecretRef: &corev1.LocalObjectReference{Name: "token"}}}
	}))
	job := waitCondition(t, ns, "taken", dorylusv1alpha1.ConditionCreated, metav1.ConditionFalse, dorylusv1alpha1.ReasonChildApplyFailed)
	want := "secret taken-credentials exists and is not the job's: the function at https://fn.default.svc.cluster.local:8080/ mounts the job's credentials under that name"
	if c := findCond(job, dorylusv1alpha1.ConditionCreated); c.Message != want {
		t.Errorf("Created: %q, want %q", c.Message, want)
	}
	var taken corev1.Secret
	if err := getObj(t, ns, "taken-credentials", &taken); err != nil || string(taken.Data["users"]) != "data" || len(taken.Data) != 1 {
		t.Errorf("the users' Secret taken-credentials: %v, data %v; want it untouched", err, taken.Data)
	}
	eventually(t, "the period's Secret undone", func() error {
		if s := jobSecrets(t, ns, "taken"); len(s) != 0 {
			return fmt.Errorf("%d Secrets of the job (%s), want none", len(s), s[0].Name)
		}
		return nil
	})
	var sts appsv1.StatefulSet // applied before the start, at zero
	if err := getObj(t, ns, "taken-gs", &sts); err != nil || *sts.Spec.Replicas != 0 || sts.Spec.Template.Annotations[AnnotationCredentialsPeriod] != "" {
		t.Errorf("graph servers without credentials: %v, replicas %v, period %q; want 0 and none", err, sts.Spec.Replicas, sts.Spec.Template.Annotations[AnnotationCredentialsPeriod])
	}
}

// jobSecrets lists the Secrets of job name in ns (by the job-name label).
func jobSecrets(t *testing.T, ns, name string) []corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{LabelJobName: name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
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

// checkCredentialMounts checks which keys of the credentials each pod template mounts, from
// which Secret, where, and that it names period.
func checkCredentialMounts(t *testing.T, ns, period, secret string) {
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
			if v.Secret == nil || v.Secret.SecretName != secret {
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
