package httpserver

import "net/http"

// New is a server for handlers that answer at once: ReadTimeout bounds reading the whole
// request (headers and body) and WriteTimeout writing the whole answer, from the end of the
// request headers, so a long upload or answer is cut: those belong on NewStreaming.
func New(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// NewStreaming is a server for a proxy: ReadTimeout bounds each wait for more of the request
// body and WriteTimeout each wait for the client to accept more of the answer, so uploads,
// downloads and streams of any length pass while they make progress, and waiting for the
// upstream is not bounded here (the upstream's client bounds it).
func NewStreaming(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           &progress{next: h, read: l.ReadTimeout, write: l.WriteTimeout},
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}
