package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dorylus-gnn/dorylus/internal/loopback"
	"github.com/dorylus-gnn/dorylus/internal/testenv"
)

// TestOperatorServesProbesMetricsAndLeads runs the operator's manager as
// main.go builds it against a real API server: it elects itself leader,
// answers its probes, refuses anonymous metrics scrapes and serves the job
// gauges to a token allowed to GET /metrics.
func TestOperatorServesProbesMetricsAndLeads(t *testing.T) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "dorylus", "k8s-v1.37.2")
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		testenv.Missing(t, fmt.Sprintf("kube-apiserver not found in %s (run hack/envtest.sh)", dir))
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir, CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	restCfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	addrs := loopback.FreeAddrs(t, 2)
	metricsAddr, probeAddr := addrs[0], addrs[1]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, restCfg, config{
			metricsAddr: metricsAddr, metricsSecure: true, probeAddr: probeAddr,
			leaderElect: true, leaderElectionID: "dorylus-test", leaderElectionNamespace: "default",
			runtimeImage: "img:1", maxConcurrentReconciles: 2, qps: 50, burst: 100,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	cs := kubernetes.NewForConfigOrDie(restCfg)
	waitFor(t, "readyz", func() error {
		return expectStatus(http.DefaultClient, "http://"+probeAddr+"/readyz", "", http.StatusOK)
	})
	waitFor(t, "leader lease", func() error {
		lease, err := cs.CoordinationV1().Leases("default").Get(ctx, "dorylus-test", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease %+v has no holder", lease.Spec)
		}
		return nil
	})

	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test endpoint
	url := "https://" + metricsAddr + "/metrics"
	waitFor(t, "anonymous scrape refused", func() error { return expectStatus(insecure, url, "", http.StatusUnauthorized) })

	// Two identities: a stranger, and a scraper bound to a metrics-reader
	// ClusterRole before its first request (the filter caches decisions).
	ns := "default"
	token := func(name string) string {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Status.Token
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stranger, scraper := token("stranger"), token("scraper")
	waitFor(t, "a token without the role is forbidden", func() error { return expectStatus(insecure, url, stranger, http.StatusForbidden) })

	// A job, so that the gauges have something to say.
	job := []byte(`{"apiVersion":"dorylus.dev/v1alpha1","kind":"GNNTrainingJob","metadata":{"name":"cora"},"spec":{"dataset":{"builtin":{"name":"cora"}}}}`)
	if err := cs.RESTClient().Post().AbsPath("/apis/dorylus.dev/v1alpha1/namespaces/default/gnntrainingjobs").
		Body(job).SetHeader("Content-Type", "application/json").Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "job gauges", func() error {
		body, err := get(insecure, url, scraper)
		if err != nil {
			return err
		}
		for _, want := range []string{
			`dorylus_gnntrainingjobs{condition="Created",status="True"} 1`,
			`dorylus_gnntrainingjobs{condition="Ready",status="False"} 1`,
			`dorylus_gnntrainingjob_restarts{name="cora",namespace="default"} 0`,
			`controller_runtime_reconcile_total{controller="gnntrainingjob"`,
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("metrics lack %q", want)
			}
		}
		return nil
	})
}

func get(c *http.Client, url, token string) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

func expectStatus(c *http.Client, url, token string, want int) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}

func waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// TestScopeFlags parses --watch-namespaces and --metrics-scraper-namespaces
// as flag.Parse does, and refuses bad values naming them.
func TestScopeFlags(t *testing.T) {
	var c config
	if err := c.setWatchNamespaces("ml, research"); err != nil || strings.Join(c.watchNamespaces, ",") != "ml,research" {
		t.Errorf("--watch-namespaces 'ml, research': %v, %q", err, c.watchNamespaces)
	}
	if err := c.setWatchNamespaces("ml,Bad_NS"); err == nil || !strings.HasPrefix(err.Error(), `namespace "Bad_NS": a lowercase RFC 1123 label`) {
		t.Errorf("--watch-namespaces ml,Bad_NS: %v", err)
	}
	if err := c.setMetricsScrapers("kubernetes.io/metadata.name in (monitoring, ops)"); err != nil {
		t.Fatal(err)
	}
	want := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"monitoring", "ops"}}}}
	if fmt.Sprint(c.metricsScrapers) != fmt.Sprint(want) {
		t.Errorf("scrapers %v, want %v", c.metricsScrapers, want)
	}
	if err := c.setMetricsScrapers("a in ("); err == nil {
		t.Error("a bad selector was accepted")
	}
}
