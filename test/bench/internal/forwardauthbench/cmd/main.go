// Command forwardauthbench prints the forward-auth benchmark (package forwardauthbench): a
// closed-loop client on the upstream directly, on the forward-auth endpoint, and through
// real Caddy and real nginx with the shipped recipes. Needs redis-server, caddy and nginx
// (make redis proxies); run from the repository.
//
//	go run ./test/bench/internal/forwardauthbench/cmd -duration 2s -runs 3 -callers 32
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/forwardauthbench"
)

func main() {
	var c forwardauthbench.Config
	flag.DurationVar(&c.Duration, "duration", 0, "measurement per run (default 2s)")
	flag.IntVar(&c.Runs, "runs", 3, "runs per path; the median is reported")
	flag.IntVar(&c.Callers, "callers", 0, "concurrent clients (default 32)")
	flag.IntVar(&c.Identities, "identities", 0, "distinct X-API-Key values (default 10000)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := forwardauthbench.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forwardauthbench:", err)
		os.Exit(1)
	}
	fmt.Print(res.Markdown())
}
