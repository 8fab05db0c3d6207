package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

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
	tlsDir     string // the job's credentials, for the pull data path
	tokenFile  string // the bearer token HTTP calls must carry
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
Every HTTP call but the health checks must carry "Authorization: Bearer <token>" with the job's
token (--token-file); a Lambda function is authorised by IAM instead. On the pull data path the
function fetches over mutual TLS with the job's credentials (--tls-dir: ca.crt, tls.crt,
tls.key). --insecure, for debugging only, serves HTTP without a token when no --token-file is
given and pulls in plaintext when no --tls-dir is given. The --fault flags inject failures for
tests.`,
		Example: `  dorylus function --listen 127.0.0.1:8080 --token-file /var/run/secrets/dorylus/job/token
  aws-lambda-rie --runtime-interface-emulator-address 127.0.0.1:9000 --runtime-api-address 127.0.0.1:9001 ./dorylus function`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	f.StringVar(&o.tlsDir, "tls-dir", os.Getenv(jobconfig.EnvTLSDir), "pull data path: folder of the job's ca.crt, tls.crt and tls.key (default $"+jobconfig.EnvTLSDir+")")
	f.StringVar(&o.tokenFile, "token-file", os.Getenv(jobconfig.EnvTokenFile), "HTTP: file of the bearer token every call must carry (default $"+jobconfig.EnvTokenFile+")")
	f.BoolVar(&o.insecure, "insecure", false, "debugging only: serve HTTP without a token and pull in plaintext, where --token-file or --tls-dir is not given")
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
	switch {
	case o.tlsDir != "":
		c, err := pki.Load(o.tlsDir)
		if err != nil {
			return fmt.Errorf("--tls-dir: %w", err)
		}
		h.SecurePull(c)
	case !o.insecure:
		h.SecurePull(nil)
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
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	fmt.Fprintf(stderr, "dorylus function: serving on %s\n", lis.Addr())
	return function.ServeHTTP(ctx, h, lis, o.grace, token)
}
