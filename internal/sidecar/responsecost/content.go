package responsecost

import (
	"errors"
	"mime"
	"net/http"
	"strings"
)

// bodyKind is how a response's body states a cost, by its media type.
type bodyKind uint8

const (
	// otherBody states none.
	otherBody bodyKind = iota
	// jsonKind is application/json or a +json type: one JSON document.
	jsonKind
	// sseKind is text/event-stream: events, each of which may carry JSON data.
	sseKind
)

// kindOf is the kind of h's body, by its one Content-Type (media type only, case
// insensitive). A body that is encoded (Content-Encoding other than identity) is read as
// no kind: its bytes are not the JSON or events themselves.
func kindOf(h http.Header) bodyKind {
	if !identityEncoded(h) {
		return otherBody
	}
	types := h.Values("Content-Type")
	if len(types) != 1 {
		return otherBody
	}
	mt, _, err := mime.ParseMediaType(types[0])
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		return otherBody
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return jsonKind
	case mt == "text/event-stream":
		return sseKind
	}
	return otherBody
}

// identityEncoded says whether h's body is sent as is: no Content-Encoding, or only
// identity.
func identityEncoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}
