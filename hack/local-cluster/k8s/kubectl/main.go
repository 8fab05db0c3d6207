// Command kubectl is kubectl built from k8s.io/kubectl at the cluster's
// release, so the e2e test talks to the local cluster with a client of the
// same version (the machine's kubectl is older than the supported skew).
package main

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
