// Package httpserver builds the sidecar's HTTP servers with the bounds a production listener
// needs: how long a client may take to send its headers and body, to read the answer, and
// to keep an idle connection, and how large its header block may be. Without them a client
// that sends slowly, never finishes its body or stops reading holds a connection, a
// goroutine and, through the proxy, an upstream connection for as long as it likes.
//
// New is for handlers that answer at once (the check API, metrics): Go's own whole-request
// ReadTimeout and WriteTimeout apply. NewStreaming is for the reverse proxy, whose uploads
// and answers may rightly take minutes: there ReadTimeout and WriteTimeout bound each wait
// for the client to make progress (the next part of the body, accepting the next part of the
// answer), as nginx's client_body_timeout and send_timeout do, never the whole exchange,
// and time spent waiting for the upstream is not counted.
package httpserver
