package benchredis

import (
	"testing"
)

func TestParseCommandstat(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=300,usec=1500,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\ncmdstat_ping:calls=1,usec=1\r\n"
	got, err := parseCommandstat(info, "EVALSHA")
	if err != nil || got.Calls != 300 || got.Usec != 1500 || got.UsecPerCall() != 5 {
		t.Errorf("parseCommandstat = %+v, %v", got, err)
	}
	if got, err := parseCommandstat(info, "eval"); err != nil || got != (CommandStat{}) {
		t.Errorf("absent command: %+v, %v", got, err)
	}
	if sum := got.Add(CommandStat{Calls: 100, Usec: 100}); sum.UsecPerCall() != 4 {
		t.Errorf("summed usec per call %v, want 4", sum.UsecPerCall())
	}
}

func TestParseBenchmarkCSV(t *testing.T) {
	out := []byte(`"test","rps","avg_latency_ms"` + "\n" + `"EVALSHA ...","123456.79","1.2"` + "\n")
	if v, err := ParseBenchmarkCSV(out); err != nil || v != 123456.79 {
		t.Errorf("ParseBenchmarkCSV = %v, %v", v, err)
	}
	if _, err := ParseBenchmarkCSV([]byte("nothing")); err == nil {
		t.Error("no error without figures")
	}
}
