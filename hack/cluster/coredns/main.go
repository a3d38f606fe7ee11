// Command coredns is CoreDNS (pinned by this directory's go.mod) with only the plugins the
// test cluster's Corefile uses, so that it builds in seconds rather than with every cloud
// provider's SDK. hack/cluster/cluster.sh builds it, caches it outside the clone and runs it
// on the pod bridge as the cluster's DNS: it answers cluster.local from the API server and
// refuses every other name, so no lookup leaves the machine.
package main

import (
	"github.com/coredns/coredns/coremain"

	// The plugins the Corefile hack/cluster/cluster.sh writes names, nothing else.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// main runs CoreDNS; the order of the plugins stays CoreDNS's own (its
// core/dnsserver/zdirectives.go), which also lists the plugins left out here.
func main() {
	coremain.Run()
}
