// Command demo is `make demo`: the whole system on one machine with no cluster. It starts an
// embedded control plane (envtest: kube-apiserver + etcd) and a local redis-server, installs
// the CRD and webhooks, runs the manager and a sidecar (reverse proxy in front of a tiny
// upstream), applies the samples with kubectl, and shows a burst answered 200 then 429, a bad
// policy refused, a policy edit reaching the sidecar, and Redis killed. Every process it
// starts is stopped by PID on exit; --stay keeps everything up to explore.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the demo's flags.
type options struct {
	stay      bool
	namespace string
	kubectl   string
}

func main() {
	var o options
	flag.BoolVar(&o.stay, "stay", false, "Keep everything running after the tour and print how to reach it; Ctrl-C stops it.")
	flag.StringVar(&o.namespace, "namespace", "demo", "Namespace the samples are applied to.")
	flag.StringVar(&o.kubectl, "kubectl", envOr("KUBECTL", "kubectl"), "kubectl binary (default $KUBECTL or kubectl on PATH).")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{opts: o, start: time.Now(), out: os.Stdout}
	err := d.run(ctx)
	d.cleanup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
