// Command etcd is a thin wrapper around go.etcd.io/etcd/server/v3's etcdmain,
// so that etcd can be built from the Go module proxy for envtest.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
