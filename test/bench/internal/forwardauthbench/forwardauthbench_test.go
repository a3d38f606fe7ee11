package forwardauthbench_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/bench/internal/forwardauthbench"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// TestRunMeasuresEveryPath: a short run measures all four paths, every request admitted.
func TestRunMeasuresEveryPath(t *testing.T) {
	for _, tool := range []string{"redis-server", "caddy", "nginx"} {
		missing.Tool(t, tool, "run `make redis proxies`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := forwardauthbench.Run(ctx, forwardauthbench.Config{Duration: 200 * time.Millisecond, Runs: 1, Callers: 4, Identities: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 {
		t.Fatalf("rows: %+v", res.Rows)
	}
	for _, row := range res.Rows {
		if s := row.Runs[0]; s.Calls == 0 || s.Denied != 0 || row.PerSec <= 0 {
			t.Errorf("%s: %+v", row.Path, s)
		}
	}
	t.Log("\n" + res.Markdown())
}
