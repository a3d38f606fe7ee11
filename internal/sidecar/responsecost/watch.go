package responsecost

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// Watch arranges for done to be called exactly once with the cost resp states, once resp's
// body has been read to its end (io.EOF) or closed, whichever comes first. found is false
// when the response stated no cost, or stated it in a form not read (see the package
// documentation): not a whole number from 0 to MaxCost, an encoded body, a JSON body beyond
// MaxJSONBody, a body closed before its end or failing with an error other than io.EOF.
//
// Watch replaces resp.Body with a reader that returns every byte, error and EOF of the
// original unchanged; its Close closes the original (once, however often it is called)
// and then calls done, and Read after Close behaves as the original's does. Read and Close
// may be called from different goroutines; done runs on the one that saw the end or
// closed first, after the original's Read or Close returned, and must not block for long.
//
// A s.Header on resp's header section is final: done gets that cost (or found=false if the
// value is not one) when the body ends or closes, even early, and the body is not parsed.
// Otherwise, at the body's end, a trailer s.Header decides if present, and else s.Field,
// read from the body. A Source that does not Validate reads what of it is valid.
//
// Two responses have no body to watch: a nil resp.Body and a 101 Switching Protocols
// response (whose body is the upgraded connection, and must stay an io.ReadWriteCloser for
// httputil.ReverseProxy). done is called at once for them, with the header's cost if any.
// A nil resp gets done(0, false); a nil done is allowed.
func Watch(resp *http.Response, s Source, done func(cost int64, found bool)) {
	if done == nil {
		done = func(int64, bool) {}
	}
	if resp == nil {
		done(0, false)
		return
	}
	w := &watcher{resp: resp, header: s.Header, done: done}
	if s.Header != "" && validateHeaderName(s.Header) == nil {
		if values := resp.Header.Values(s.Header); len(values) > 0 {
			w.final = true
			w.cost, w.found = parseHeaderCost(values)
		}
	}
	if resp.Body == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		w.finished = true
		done(w.cost, w.found)
		return
	}
	if !w.final {
		w.reader = newBodyReader(resp, s.Field)
	}
	resp.Body = &body{rc: resp.Body, w: w}
}

// watcher is one response's watch: what it has read, and whether done has been called.
type watcher struct {
	resp   *http.Response
	header string
	done   func(cost int64, found bool)

	mu       sync.Mutex
	finished bool       // done has been called, or is about to be
	final    bool       // the header section stated the cost: cost and found hold it
	cost     int64      // with final
	found    bool       // with final
	reader   bodyReader // nil: the body is not read (final, nothing to read, or it failed)
}

// observe reads what one Read of the body returned: its bytes, and its error. At io.EOF it
// calls done.
func (w *watcher) observe(p []byte, err error) {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	if w.reader != nil && len(p) > 0 {
		w.reader.write(p)
	}
	switch {
	case err == nil:
		w.mu.Unlock()
		return
	case !errors.Is(err, io.EOF):
		w.reader = nil // a broken body states no cost, whatever its bytes said
		w.mu.Unlock()
		return
	}
	w.finished = true
	cost, found := w.atEnd()
	w.reader = nil
	w.mu.Unlock()
	w.done(cost, found)
}

// atEnd is the cost the response stated, its body read to the end.
func (w *watcher) atEnd() (int64, bool) {
	switch {
	case w.final:
		return w.cost, w.found
	case w.header != "":
		if values := w.resp.Trailer.Values(w.header); len(values) > 0 {
			return parseHeaderCost(values)
		}
	}
	if w.reader == nil {
		return 0, false
	}
	return w.reader.end()
}

// closed calls done unless the body's end already did: with the header section's cost,
// if it stated one, else with none.
func (w *watcher) closed() {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	w.finished = true
	w.reader = nil
	cost, found := w.cost, w.found
	w.mu.Unlock()
	w.done(cost, found)
}

// errBrokenReader marks a Read that returned a count outside its buffer.
var errBrokenReader = errors.New("responsecost: the body's Read returned an invalid count")
