package redistest

import (
	"strings"
	"testing"
)

// TestProcsTurnsFatalIntoError: a failure outside a test ends the call with an
// error, and Close runs what was registered.
func TestProcsTurnsFatalIntoError(t *testing.T) {
	p := NewProcs()
	ran := false
	p.tb.Cleanup(func() { ran = true })
	err := p.tb.do(func() { p.tb.Fatalf("no %s", "luck") })
	if err == nil || !strings.Contains(err.Error(), "no luck") {
		t.Errorf("do = %v, want the Fatalf message", err)
	}
	p.tb.Errorf("stop failed")
	if err := p.Close(); !ran || err == nil || !strings.Contains(err.Error(), "stop failed") {
		t.Errorf("Close = %v (cleanup ran %v), want the Errorf message after running the cleanup", err, ran)
	}
}

// TestProcsDoTurnsFatalIntoError: a helper that takes a testing.TB and fails inside Do ends
// Do with an error, not the process.
func TestProcsDoTurnsFatalIntoError(t *testing.T) {
	p := NewProcs()
	if err := p.Do(func(tb testing.TB) { tb.Fatalf("no %s", "luck") }); err == nil || !strings.Contains(err.Error(), "no luck") {
		t.Errorf("Do = %v, want the Fatalf message", err)
	}
	if err := p.Do(func(testing.TB) {}); err != nil {
		t.Errorf("Do of nothing = %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}
