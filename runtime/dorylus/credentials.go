package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

func newCredentialsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "credentials DIR",
		Short: "Issue a run's data-plane credentials into a folder",
		Long: `Credentials makes a CA and the credentials it signs (pkg/pki) in DIR, created readable by its
owner only, as the operator's credentials Secret holds them: the servers' certificate, the HTTP
function's, the function issuer and a bearer token. dorylus train --graph-servers N
--credentials-dir DIR runs on them instead of a CA made for the run, so that an HTTP function
started before the run (dorylus function --credentials-dir DIR --token-file DIR/token) serves
HTTPS with the run's function certificate, which the graph servers verify. The CA's key is
discarded: new credentials need a new folder. A folder that holds credentials is refused.`,
		Example: `  dorylus credentials /tmp/run
  dorylus function --listen 127.0.0.1:8443 --credentials-dir /tmp/run --token-file /tmp/run/token &
  dorylus train --graph-servers 2 --backend knative --knative-urls https://127.0.0.1:8443 \
    --knative-token-file /tmp/run/token --credentials-dir /tmp/run`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dir := args[0]
			if _, err := os.Stat(filepath.Join(dir, pki.CAFile)); err == nil {
				return fmt.Errorf("%s already holds credentials (%s): use a new folder", dir, pki.CAFile)
			}
			b, err := pki.Issue("dorylus credentials " + filepath.Base(dir))
			if err != nil {
				return err
			}
			return b.WriteDir(dir)
		},
	}
}
