// Command nodeagent is a test-only node agent for a local Kubernetes cluster
// without a container runtime: it registers a Node, keeps it Ready with
// leases, and runs every Pod bound to it as local OS processes.
//
// Each pod gets a network namespace of its own (a veth pair into a bridge,
// an address from --pod-cidr) and a private mount namespace in which its
// volumes (ConfigMap, Secret, projected ServiceAccount token and CA,
// downward API, emptyDir) are bind-mounted at their mountPaths and a hosts
// file that resolves the cluster's Service and pod names is mounted over
// /etc/hosts. A container's image maps to a local folder of binaries
// (--image), so command /dorylus of image dorylus-gnn/dorylus runs
// DIR/dorylus. The agent runs readiness, liveness and startup probes (gRPC,
// HTTP, TCP, exec), reports phase, readiness, exit codes and restart counts
// into the Pod's status, restarts containers by restartPolicy with a
// back-off, and kills the processes when the Pod is deleted. The API server,
// on loopback, is reached from pods through a forwarder on the bridge's
// address, which KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT name.
//
// It must run as root (namespaces, mounts, links). Not part of any image.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// config is the agent's command line.
type config struct {
	kubeconfig  string
	nodeName    string
	stateDir    string
	images      imageMap
	bridge      string
	podCIDR     netip.Prefix
	apiServer   netip.AddrPort
	cpu, memory resource.Quantity
	maxPods     int64
	backoff     time.Duration
	maxBackoff  time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == mountExecCommand {
		if err := mountExec(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "nodeagent %s: %v\n", mountExecCommand, err)
			os.Exit(127)
		}
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		log.Printf("nodeagent: %v", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	c := config{images: imageMap{}}
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the agent's identity (required)")
	fs.StringVar(&c.nodeName, "node-name", "dorylus-local", "name of the Node to register")
	fs.StringVar(&c.stateDir, "state-dir", "", "folder for pod volumes, logs and hosts files (required)")
	fs.Var(&c.images, "image", "REPOSITORY=DIR: containers of image REPOSITORY (any tag) run the binaries in DIR, command /x as DIR/x (repeatable)")
	fs.StringVar(&c.bridge, "bridge", "dorylus0", "name of the bridge the pods' veth pairs join")
	cidr := fs.String("pod-cidr", "10.213.0.0/24", "pod addresses; the first is the bridge's (and the API server forwarder's)")
	api := fs.String("apiserver", "", "IP:port of the API server on loopback, forwarded to pods on the bridge address (required)")
	cpu := fs.String("cpu", "32", "CPU capacity the Node advertises")
	mem := fs.String("memory", "64Gi", "memory capacity the Node advertises")
	fs.Int64Var(&c.maxPods, "max-pods", 110, "pod capacity the Node advertises")
	fs.DurationVar(&c.backoff, "restart-backoff", time.Second, "first delay before restarting an exited container; doubles on every restart")
	fs.DurationVar(&c.maxBackoff, "max-restart-backoff", 30*time.Second, "longest delay before a restart")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var missing []string
	for name, v := range map[string]string{"--kubeconfig": c.kubeconfig, "--state-dir": c.stateDir, "--apiserver": *api} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	var err error
	if c.podCIDR, err = netip.ParsePrefix(*cidr); err != nil || !c.podCIDR.Addr().Is4() || c.podCIDR.Bits() > 28 {
		return c, fmt.Errorf("--pod-cidr %q: want an IPv4 prefix of /28 or wider", *cidr)
	}
	c.podCIDR = c.podCIDR.Masked()
	if c.apiServer, err = netip.ParseAddrPort(*api); err != nil {
		return c, fmt.Errorf("--apiserver %q: want IP:port", *api)
	}
	if c.cpu, err = resource.ParseQuantity(*cpu); err != nil {
		return c, fmt.Errorf("--cpu %q: %w", *cpu, err)
	}
	if c.memory, err = resource.ParseQuantity(*mem); err != nil {
		return c, fmt.Errorf("--memory %q: %w", *mem, err)
	}
	if c.backoff <= 0 || c.maxBackoff < c.backoff {
		return c, fmt.Errorf("--restart-backoff %v, --max-restart-backoff %v: want 0 < first ≤ longest", c.backoff, c.maxBackoff)
	}
	return c, nil
}

// run registers the node and serves pods until ctx ends, then stops every
// pod's processes and removes the pods' namespaces.
func run(ctx context.Context, cfg config) error {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", cfg.kubeconfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	net, err := newNetwork(cfg.bridge, cfg.podCIDR)
	if err != nil {
		return err
	}
	defer net.close()
	fwd, err := forward(ctx, netip.AddrPortFrom(net.gateway, cfg.apiServer.Port()).String(), cfg.apiServer.String())
	if err != nil {
		return err
	}
	defer fwd.Close()
	a, err := newAgent(cfg, cs, net)
	if err != nil {
		return err
	}
	return a.run(ctx)
}
