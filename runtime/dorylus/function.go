package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/internal/gctune"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/runtime/function"
)

// functionOptions are the flags of `dorylus function`.
type functionOptions struct {
	listen     string
	maxRequest int
	grace      time.Duration
	faults     function.Faults
	tokenFile  string // the bearer token HTTP calls must carry
	credsDir   string // the job's credentials: HTTPS with the function certificate
	networks   string // what the pull data path may dial
	insecure   bool
}

func newFunctionCommand() *cobra.Command {
	o := functionOptions{}
	cmd := &cobra.Command{
		Use:   "function",
		Short: "Serve tensor tasks as an AWS Lambda function or an HTTP (Knative) service",
		Long: `Function is the stateless tensor worker of the lambda and knative backends: it runs the AV,
loss and ∇AV tasks (a GAT's AV, ∇AV, AE and ∇AE) sent to it in the dispatch wire format. Under AWS Lambda (or its runtime
interface emulator), detected by $AWS_LAMBDA_RUNTIME_API, it serves Lambda invocations; elsewhere
it serves HTTP on --listen (default :$PORT, as Knative sets it, else :` + fmt.Sprint(jobconfig.FunctionPort) + `): POST / runs a task,
GET /healthz and /readyz report health, and SIGTERM drains the calls in flight before exiting.
With --credentials-dir (a mount of the job's credentials Secret: ca.crt, function.crt,
function.key) it serves HTTPS only, with the function certificate of the job's CA, which the
graph servers verify, and reloads it when the Secret's files change; without, plain HTTP (as a
Knative Service's container, behind the queue-proxy). Every HTTP call but the health checks
must carry "Authorization: Bearer <token>" with the job's token (--token-file); a Lambda
function is authorised by IAM instead. On the pull data path the
function fetches over mutual TLS with a certificate of the job's CA, which every descriptor
names: the --credentials-dir function certificate when it is of that CA, else one the job's
graph server signs for a key the function makes and keeps in memory (it answers the first
descriptor of a job with its public key, and the graph server sends the call again with the
certificate), so one function serves any job and no request carries a private key. It dials only what
--pull-networks allows (by default any address but loopback, link-local, unspecified and
multicast ones). --insecure,
for debugging only, serves HTTP without a token when no --token-file is given and pulls in
plaintext for descriptors without a CA (a job run with --insecure). The --fault flags inject failures for tests.`,
		Example: `  dorylus function --listen 127.0.0.1:8443 --token-file /var/run/secrets/dorylus/job/token --credentials-dir /var/run/secrets/dorylus/job
  aws-lambda-rie --runtime-interface-emulator-address 127.0.0.1:9000 --runtime-api-address 127.0.0.1:9001 ./dorylus function`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.LimitHeap(cmd.ErrOrStderr())
			return runFunction(cmd.Context(), o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	listen := fmt.Sprintf(":%d", jobconfig.FunctionPort)
	if p := os.Getenv("PORT"); p != "" {
		listen = ":" + p
	}
	f.StringVar(&o.listen, "listen", listen, "HTTP address to serve on (not under Lambda)")
	f.IntVar(&o.maxRequest, "max-request-bytes", 0, "refuse requests larger than this (0: Lambda's own limit, or function.MaxHTTPRequest, 1 GiB, over HTTP)")
	f.DurationVar(&o.grace, "shutdown-grace", 30*time.Second, "how long SIGTERM waits for the calls in flight")
	f.StringVar(&o.tokenFile, "token-file", os.Getenv(jobconfig.EnvTokenFile), "HTTP: file of the bearer token every call must carry (default $"+jobconfig.EnvTokenFile+")")
	f.StringVar(&o.credsDir, "credentials-dir", "", "HTTP: folder of the job's "+pki.CAFile+", "+pki.FunctionCertFile+" and "+pki.FunctionKeyFile+" (a mounted credentials Secret): serve HTTPS with that certificate, and pull with it for that CA's jobs")
	f.StringVar(&o.networks, "pull-networks", os.Getenv(function.EnvPullNetworks), "pull data path: comma-separated CIDR prefixes of the only addresses to fetch from, e.g. the cluster's pod network (default $"+function.EnvPullNetworks+"; empty: any but loopback, link-local, unspecified and multicast addresses)")
	f.BoolVar(&o.insecure, "insecure", false, "debugging only: serve HTTP without a token where --token-file is not given, and pull in plaintext for descriptors without a CA certificate")
	f.IntVar(&o.faults.Every, "fault-every", 0, "inject a fault into every Nth call (0: none)")
	f.StringVar(&o.faults.Mode, "fault", function.FaultDelay, "fault to inject: delay, error, hang or exit")
	f.DurationVar(&o.faults.Delay, "fault-delay", 0, "with --fault delay: how long the call is delayed")
	return cmd
}

func runFunction(ctx context.Context, o functionOptions, stderr io.Writer) error {
	h, err := function.NewHandler(o.faults, o.maxRequest)
	if err != nil {
		return err
	}
	if o.insecure {
		h.AllowPlaintextPull()
	}
	nets, err := function.ParseNetworks(o.networks)
	if err != nil {
		return fmt.Errorf("--pull-networks: %w", err)
	}
	h.AllowPullNetworks(nets)
	var creds *pki.Reloader
	if o.credsDir != "" {
		if creds, err = pki.NewFunctionReloader(o.credsDir); err != nil {
			return fmt.Errorf("--credentials-dir: %w", err)
		}
		h.UseCredentials(creds)
	}
	if function.InLambda() {
		function.ServeLambda(ctx, h)
		return nil
	}
	var token string
	switch {
	case o.tokenFile != "":
		if token, err = pki.LoadToken(o.tokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
	case !o.insecure:
		return fmt.Errorf("--token-file (or $%s) is required to serve HTTP; --insecure serves without authentication, for debugging", jobconfig.EnvTokenFile)
	}
	var tlsConf *tls.Config
	scheme := "http"
	if creds != nil {
		tlsConf, scheme = creds.HTTPSConfig(), "https"
	}
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	fmt.Fprintf(stderr, "dorylus function: serving %s on %s\n", scheme, lis.Addr())
	return function.ServeHTTP(ctx, h, lis, o.grace, token, tlsConf)
}
