package responsecost

import (
	"io"
	"sync"
)

// body is the watched response body: it passes every Read and the first Close to the
// original, and tells the watcher what passed.
type body struct {
	rc io.ReadCloser
	w  *watcher

	closeOnce sync.Once
	closeErr  error
}

// Read reads from the original body, unchanged.
func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n < 0 || n > len(p) { // a broken reader: pass it on, read nothing more
		b.w.observe(nil, errBrokenReader)
		return n, err
	}
	b.w.observe(p[:n], err)
	return n, err
}

// Close closes the original body the first time, then calls done unless the body's end
// already did; later calls return the first one's error.
func (b *body) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.rc.Close() })
	b.w.closed()
	return b.closeErr
}
