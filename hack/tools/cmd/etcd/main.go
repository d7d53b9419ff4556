// Command etcd is a minimal etcd server entry point for Portico's local test
// control plane, built from the go.etcd.io/etcd/server/v3 module so no
// prebuilt binary has to be downloaded.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
