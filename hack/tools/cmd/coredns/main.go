// Command coredns is CoreDNS with only the plugins the node tests' cluster
// DNS uses (hack/node.sh): bind, kubernetes, forward, cache, errors and
// ready. Built here, beside the control plane, it shares the Kubernetes
// client packages with it instead of pulling CoreDNS's every plugin
// (cloud DNS providers, tracing) into the cold build.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
