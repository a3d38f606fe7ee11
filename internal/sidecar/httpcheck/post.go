package httpcheck

import (
	"context"
	"io"
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/jsonreply"
)

// servePOST answers a POST-only JSON endpoint: 405 (with Allow) for another method, else
// answer's error as JSON with its status, or its response with 200.
func servePOST[T any](w http.ResponseWriter, r *http.Request, answer func(context.Context, io.Reader) (T, int, error)) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		jsonreply.Error(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	resp, status, err := answer(r.Context(), r.Body)
	if err != nil {
		jsonreply.Error(w, status, err.Error())
		return
	}
	jsonreply.Write(w, http.StatusOK, resp)
}

// checkOn is req's rule and check on e's snapshot in force, and that snapshot: 503 when
// there is none yet, else checkwire.CheckOf's status.
func checkOn(e *engine.Engine, req *checkwire.Request) (*engine.Set, *engine.Rule, engine.Check, int, error) {
	set, err := e.Snapshot()
	if err != nil {
		return nil, nil, engine.Check{}, http.StatusServiceUnavailable, err
	}
	rule, c, status, err := checkwire.CheckOf(set, req)
	return set, rule, c, status, err
}
