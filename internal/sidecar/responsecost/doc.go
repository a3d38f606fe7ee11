// Package responsecost learns the cost of a request from its HTTP response while the
// response streams through a reverse proxy: an LLM API, for one, states the tokens a call
// used in its response, as a JSON body's usage object or in the last events of a
// text/event-stream (SSE) answer. The proxy calls Watch in its ModifyResponse; Watch
// replaces the response's body with a reader that yields every byte unchanged, reads the
// cost on the way without buffering the whole body, and calls back once the body has been
// read to its end or closed.
//
// # Where the cost is read
//
// A Source names a response header (or trailer), a dot path into a JSON object, or both:
//
//   - Header: the header's value, a whole number. A header on the response's header section
//     is final: the body is not parsed, and the callback gets that cost even when the body
//     is closed early. Failing that, a trailer of that name is read once the body ends.
//     A header or trailer that is present decides, even when its value is not read (sent
//     on several field lines, not a whole number, out of range): Field is then not
//     consulted.
//   - Field: read from an application/json (or any +json) body, or from the data of every
//     text/event-stream event that is a JSON object holding the path; the last such event
//     decides ("usage.output_tokens" on Anthropic's message_delta wins over an earlier
//     one), even when its value is not a cost. A value of null counts as absent, so
//     OpenAI's chunks with "usage": null before the final one change nothing. Media types
//     are compared as media types (parameters aside, case insensitive). A cost read from
//     the body counts only when the body was read to its end: a body closed before (the
//     client went away) or failing with an error states none.
//
// Each path segment is an object key as the JSON writes it: a key written with escapes
// ("total\u005ftokens") is not matched. Event streams follow the HTML standard's
// "Event stream interpretation" (lines end in "\n", "\r\n" or "\r"; an event's data lines
// are joined with "\n"; a blank line dispatches it; a leading byte order mark is skipped),
// except that an event still pending when the stream ends is read too, since an upstream
// may end its stream without the last blank line. Data that is no JSON object, such as
// OpenAI's "[DONE]", is skipped.
//
// A cost is a whole number from 0 to MaxCost. A header or trailer states it in decimal
// digits alone ("42"; not "+42", "42.0" or "4e1"); a JSON value as a number whose value is
// whole, exactly: 21, 21.0 and 2.1e1 are 21; -1, 1.5, "21", 1e300 and true state none.
//
// In a reverse proxy:
//
//	ModifyResponse: func(resp *http.Response) error {
//		responsecost.Watch(resp, src, func(cost int64, found bool) { settle(resp.Request, cost, found) })
//		return nil
//	},
//
// # Bounds
//
// A hostile upstream or client must not make the sidecar hold unbounded memory or spend
// unbounded CPU. A watch holds at most about MaxJSONBody or MaxEventData bytes, and spends
// time linear in the bytes that pass:
//
//   - A JSON body is buffered up to MaxJSONBody; beyond it (or when Content-Length says so
//     up front) buffering stops and the response states no cost. It is decoded at most once,
//     at its end, and only when it contains the path's last segment followed by a quote.
//   - An SSE stream is parsed incrementally, line by line, holding one event's data at a
//     time: an event whose data exceeds MaxEventData is dropped unbuffered (the stream goes
//     on). Only an event whose data contains the path's last segment followed by a quote
//     is decoded, so a long stream costs one substring search per event.
//   - A path has at most MaxPathSegments segments and MaxPathBytes bytes.
//   - A body with a Content-Encoding other than identity (gzip, br, ...) is not decoded:
//     the response states no cost through Field.
//
// The bytes the client receives are never changed, delayed or reordered: the reader
// returns exactly what the upstream's body returned, when it returned it.
package responsecost
