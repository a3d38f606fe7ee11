package verdict

import (
	"fmt"
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
)

// WriteDenial answers a denial over HTTP as the reverse proxy and forward auth do: v's
// status with its RateLimit headers, and its message as one line of text/plain (naming a
// policy and a limit, never anything of the request).
func WriteDenial(w http.ResponseWriter, v *Verdict) {
	ratelimitheaders.Set(w.Header(), v.Fields)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(v.Status)
	_, _ = fmt.Fprintln(w, v.Message) // the client may be gone; nothing to do about it
}
