// Command dorylus-operator runs the GNNTrainingJob controller: a
// controller-runtime manager with leader election, health probes and a
// Prometheus endpoint behind Kubernetes authentication and authorization.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/controllers"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
)

// config holds the command-line settings.
type config struct {
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	runtimeImage            string
	maxConcurrentReconciles int
	qps                     float64
	burst                   int
	pricesFile              string
	pricing                 controllers.Pricing
	// watchNamespaces limits the operator to these namespaces; none: all.
	watchNamespaces []string
	// metricsScrapers selects the namespaces that may scrape the jobs' servers.
	metricsScrapers metav1.LabelSelector
}

// defaultMetricsScrapers is --metrics-scraper-namespaces unless set.
const defaultMetricsScrapers = "kubernetes.io/metadata.name=monitoring"

func main() {
	var cfg config
	flag.StringVar(&cfg.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint; 0 disables it")
	flag.BoolVar(&cfg.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS behind Kubernetes authentication and authorization")
	flag.StringVar(&cfg.metricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for the metrics endpoint; empty: a self-signed certificate")
	flag.StringVar(&cfg.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.BoolVar(&cfg.leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.StringVar(&cfg.leaderElectionID, "leader-election-id", "dorylus-operator.dorylus.dev", "name of the leader-election Lease")
	flag.StringVar(&cfg.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease; empty: the pod's namespace")
	flag.StringVar(&cfg.runtimeImage, "runtime-image", "dorylus-gnn/dorylus:latest", "image holding the dorylus command, for jobs that set no spec.image")
	flag.IntVar(&cfg.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "jobs reconciled at once")
	flag.Float64Var(&cfg.qps, "kube-api-qps", 50, "client-side rate limit on API requests per second")
	flag.IntVar(&cfg.burst, "kube-api-burst", 100, "burst of the client-side rate limit")
	flag.StringVar(&cfg.pricesFile, "prices", "", "JSON price list over the built-in one (pkg/cost), written into every job's run config: spot prices, discounts, another region")
	flag.StringVar(&cfg.pricing.GraphServerInstance, "graph-server-instance-type", cost.DefaultGraphServerInstance, "instance type of the graph servers of a job whose nodeSelector names no "+corev1.LabelInstanceTypeStable)
	flag.StringVar(&cfg.pricing.ParameterServerInstance, "param-server-instance-type", cost.DefaultParameterServerInstance, "instance type of the parameter servers of a job whose nodeSelector names no "+corev1.LabelInstanceTypeStable)
	flag.Func("watch-namespaces", "comma-separated namespaces whose jobs the operator reconciles; unset: every namespace", cfg.setWatchNamespaces)
	flag.Func("metrics-scraper-namespaces", "label selector of the namespaces whose pods may reach the jobs' metrics port through their NetworkPolicy (default "+defaultMetricsScrapers+"; empty: every namespace)", cfg.setMetricsScrapers)
	_ = cfg.setMetricsScrapers(defaultMetricsScrapers)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	err := cfg.readPrices()
	var restCfg *rest.Config
	if err == nil {
		restCfg, err = ctrl.GetConfig()
	}
	if err == nil {
		err = run(ctrl.SetupSignalHandler(), restCfg, cfg)
	}
	if err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

// readPrices reads --prices over the built-in price list and checks that the default
// instance types have prices.
func (c *config) readPrices() error {
	if c.pricesFile != "" {
		f, err := os.Open(c.pricesFile)
		if err != nil {
			return fmt.Errorf("--prices: %w", err)
		}
		defer f.Close()
		if c.pricing.Prices, err = cost.ReadPrices(f); err != nil {
			return fmt.Errorf("--prices %s: %w", c.pricesFile, err)
		}
	}
	return c.pricing.Validate()
}

// setWatchNamespaces parses --watch-namespaces.
func (c *config) setWatchNamespaces(v string) error {
	c.watchNamespaces = nil
	for ns := range strings.SplitSeq(v, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		c.watchNamespaces = append(c.watchNamespaces, ns)
	}
	return nil
}

// setMetricsScrapers parses --metrics-scraper-namespaces.
func (c *config) setMetricsScrapers(v string) error {
	sel, err := metav1.ParseToLabelSelector(v)
	if err != nil {
		return err
	}
	c.metricsScrapers = *sel
	return nil
}

// run starts the manager against the API server of restCfg and blocks until
// ctx ends.
func run(ctx context.Context, restCfg *rest.Config, cfg config) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(dorylusv1alpha1.AddToScheme(scheme))
	restCfg = rest.CopyConfig(restCfg)
	restCfg.QPS, restCfg.Burst = float32(cfg.qps), cfg.burst

	metricsOpts := metricsserver.Options{
		BindAddress:   cfg.metricsAddr,
		SecureServing: cfg.metricsSecure,
		CertDir:       cfg.metricsCertDir,
	}
	if cfg.metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        cfg.probeAddr,
		LeaderElection:                cfg.leaderElect,
		LeaderElectionID:              cfg.leaderElectionID,
		LeaderElectionNamespace:       cfg.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         controllers.CacheOptions(cfg.watchNamespaces...),
		Client:                        client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	knative, err := controllers.KnativeServed(mgr.GetRESTMapper())
	if err != nil {
		return fmt.Errorf("discover Knative Serving: %w", err)
	}
	kueue, err := controllers.KueueServed(mgr.GetRESTMapper())
	if err != nil {
		return fmt.Errorf("discover Kueue: %w", err)
	}
	ctrl.Log.Info("starting", "runtimeImage", cfg.runtimeImage, "watchNamespaces", cfg.watchNamespaces, "knativeServing", knative, "kueue", kueue, "prices", cmp.Or(cfg.pricesFile, "built-in"))

	r := &controllers.GNNTrainingJobReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("dorylus-operator"),
		Clock:            clock.RealClock{},
		RuntimeImage:     cfg.runtimeImage,
		APIReader:        mgr.GetAPIReader(),
		KnativeAvailable: knative,
		KueueAvailable:   kueue,
		Pricing:          cfg.pricing,
		MetricsScrapers:  cfg.metricsScrapers,
	}
	if err := r.SetupWithManager(mgr, controllers.Options{MaxConcurrentReconciles: cfg.maxConcurrentReconciles}); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := metrics.Registry.Register(controllers.NewJobCollector(mgr.GetCache())); err != nil {
		return fmt.Errorf("register job metrics: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
