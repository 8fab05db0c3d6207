// Command dorylus is the data plane of Dorylus: it trains GNNs in one process (`dorylus train`),
// converts datasets to the prepared binary format (`dorylus prepare`), and runs the distributed
// roles.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	// The runtime image has no CA bundle: HTTPS to S3, Lambda and dataset
	// URLs trusts these roots when the system offers none.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCommand()
	root.SetArgs(commandArgs(os.Args))
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dorylus:", err)
		os.Exit(1)
	}
}

// commandArgs returns the arguments of the command line argv: those given or, for an
// executable named bootstrap started without any (how the Lambda provided runtimes start a
// function's zip, hack/lambda), those of `dorylus function`.
func commandArgs(argv []string) []string {
	if len(argv) == 1 && filepath.Base(argv[0]) == "bootstrap" {
		return []string{"function"}
	}
	return argv[1:]
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "dorylus",
		Short:         "Affordable, scalable GNN training on CPU servers and serverless threads",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newTrainCommand(), newPrepareCommand(), newPartitionCommand(), newGraphServerCommand(), newParamServerCommand(), newFunctionCommand(), newCredentialsCommand(), newPredictCommand(), newPlanCommand())
	return root
}
