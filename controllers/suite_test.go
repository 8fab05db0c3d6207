package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/internal/testenv"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
)

// The envtest suite: one real kube-apiserver and etcd for the package, one
// manager running the reconciler on a fake clock as the chart's ServiceAccount
// (chartOperator), and a direct (uncached) admin client for the tests.
var (
	testEnv    *envtest.Environment
	restConfig *rest.Config
	// operatorConfig is the manager's: restConfig impersonating the chart's ServiceAccount.
	operatorConfig *rest.Config
	k8sClient      client.Client
	testScheme     = runtime.NewScheme()
	fakeClock      = clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	// direct reconciles on the same clock, to assert exact requeues.
	direct *GNNTrainingJobReconciler
	// operatorRequests counts every API request the manager sends.
	operatorRequests = &requestCounter{}
)

const testImage = "dorylus-gnn/dorylus:test"

// testPricing is the operator's pricing in the suite: a price list read over the default
// one, as the chart's cost.prices value gives it, and default instance types.
var testPricing = func() Pricing {
	p, err := cost.ReadPrices(strings.NewReader(`{"source": "test spot prices", "asOf": "2026-03-01",
		"instances": {"c5.xlarge": {"vcpus": 4, "memoryGiB": 8, "hourUSD": 0.07}}}`))
	utilruntime.Must(err)
	return Pricing{Prices: p, GraphServerInstance: "c5n.xlarge", ParameterServerInstance: "c5.xlarge"}
}()

// testScrapers selects the namespaces that may scrape the jobs' metrics in the suite.
var testScrapers = metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "monitoring"}}

// The manager's client-side rate limit and concurrency: main.go's defaults.
const (
	managerQPS         = 50
	managerBurst       = 100
	managerConcurrency = 4
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(testScheme))
	utilruntime.Must(dorylusv1alpha1.AddToScheme(testScheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(testScheme))
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// assetsDir finds the kube-apiserver and etcd binaries: KUBEBUILDER_ASSETS,
// else the cache hack/envtest.sh builds into.
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	if dir := os.Getenv("DORYLUS_ENVTEST_DIR"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "dorylus", "k8s-v1.37.2")
}

func runSuite(m *testing.M) int {
	dir := assetsDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			fmt.Fprintf(os.Stderr, "envtest: %s not found in %s (run hack/envtest.sh or make envtest); %s installs every component the tests need\n", bin, dir, testenv.SetUp)
			return 1
		}
	}
	logOpts := []zap.Opts{zap.WriteTo(os.Stderr)}
	if os.Getenv("DORYLUS_TEST_VERBOSE") == "" {
		logOpts = append(logOpts, zap.Level(zapcore.ErrorLevel))
	}
	logf.SetLogger(zap.New(logOpts...))
	kueueCRDs, err := kueueCRDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "envtest: Kueue: %v; %s installs every component the tests need\n", err, testenv.SetUp)
		return 1
	}
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases"), filepath.Join("testdata", "crds")},
		CRDs:                  kueueCRDs,
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest start:", err)
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "envtest stop:", err)
		}
	}()
	cfg.QPS, cfg.Burst = 500, 1000
	restConfig = cfg
	if k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The operator acts as the chart's ServiceAccount with exactly the rules a default
	// (cluster-wide) install grants it: every test runs it on least privilege.
	operatorConfig, err = chartOperator(ctx, k8sClient, cfg, "envtest", "dorylus-system")
	if err != nil {
		fmt.Fprintf(os.Stderr, "the chart's operator identity: %v; %s installs every component the tests need\n", err, testenv.SetUp)
		return 1
	}
	mgr, r, err := newTestManager(operatorConfig, operatorRequests, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	direct = r
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

// newTestManager builds a manager like main.go's (same cache, client and
// controller setup) on the fake clock, watching namespaces (none: all), with
// leader election in electionNS unless it is ""; requests counts what it sends.
func newTestManager(cfg *rest.Config, requests *requestCounter, electionNS string, namespaces ...string) (ctrl.Manager, *GNNTrainingJobReconciler, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = managerQPS, managerBurst // main.go's defaults
	cfg.Wrap(requests.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        testScheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Cache:                         CacheOptions(namespaces...),
		Client:                        client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Controller:                    config.Controller{SkipNameValidation: ptrTrue()},
		LeaderElection:                electionNS != "",
		LeaderElectionID:              "dorylus-operator-test",
		LeaderElectionNamespace:       electionNS,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, nil, err
	}
	knative, err := KnativeServed(mgr.GetRESTMapper())
	if err != nil {
		return nil, nil, err
	}
	kueue, err := KueueServed(mgr.GetRESTMapper())
	if err != nil {
		return nil, nil, err
	}
	r := &GNNTrainingJobReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("dorylus-operator"),
		Clock:            fakeClock,
		RuntimeImage:     testImage,
		APIReader:        mgr.GetAPIReader(),
		KnativeAvailable: knative,
		KueueAvailable:   kueue,
		Pricing:          testPricing,
		MetricsScrapers:  testScrapers,
	}
	if err := r.SetupWithManager(mgr, Options{MaxConcurrentReconciles: managerConcurrency}); err != nil {
		return nil, nil, err
	}
	return mgr, r, nil
}

func ptrTrue() *bool { b := true; return &b }

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// eventually polls f until it returns nil, failing the test with its last
// error after timeout.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: still failing after 20s: %v", what, err)
}
