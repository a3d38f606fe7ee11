package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

func printTable(w io.Writer, rows []row, base row, c config) {
	_, _ = fmt.Fprintf(w, "limiter-bench: one redis-server on loopback, %d identities, %d concurrent callers, %d Go checks and %d redis-benchmark calls per figure\n\n",
		c.identities, c.concurrency, c.calls, c.benchCalls)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "script\tredis µs/call\tvs baseline\tredis-benchmark -P16/s\tdirect/s\tdirect p50\tdirect p99\tpipelined/s\tpipelined p50\tpipelined p99\tpipelined vs ceiling\tbytes/id (49-char key)\tbytes/id (27-char key)\t")
	for _, r := range rows {
		_, _ = fmt.Fprintf(tw, "%s\t%.2f\t%.2fx\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t\n",
			r.name, r.redisUS, r.redisUS/base.redisUS, r.ceiling,
			rate(r.direct), dur(r.direct.p50), dur(r.direct.p99),
			rate(r.piped), dur(r.piped.p50), dur(r.piped.p99), ratio(r.piped.perSec, r.ceiling),
			r.bytesPerID, byteCount(r.bytesShort))
	}
	_ = tw.Flush()
}

func rate(s stats) string {
	if s.perSec == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", s.perSec)
}

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

func byteCount(b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", b)
}
