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
	"github.com/dorylus-gnn/dorylus/runtime/function"
)

// functionOptions are the flags of `dorylus function`.
type functionOptions struct {
	listen     string
	maxRequest int
	grace      time.Duration
	faults     function.Faults
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
The --fault flags inject failures for tests.`,
		Example: `  dorylus function --listen 127.0.0.1:8080
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
	if function.InLambda() {
		function.ServeLambda(ctx, h)
		return nil
	}
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	fmt.Fprintf(stderr, "dorylus function: serving on %s\n", lis.Addr())
	return function.ServeHTTP(ctx, h, lis, o.grace)
}
