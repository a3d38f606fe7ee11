package responsecost

import "net/http"

// preallocJSON is the most buffer a JSON body's Content-Length reserves up front (the
// buffer grows from there, up to MaxJSONBody, as the body arrives).
const preallocJSON = 64 << 10

// bodyReader reads a cost from a body's bytes as they pass.
type bodyReader interface {
	// write reads the body's next bytes (it must not keep p).
	write(p []byte)
	// end is the cost the body stated, once it has been read to its end.
	end() (cost int64, found bool)
}

// newBodyReader is the reader for resp's body and field, or nil when the body states no
// cost through field (no field, another media type, encoded, or a JSON body longer than
// MaxJSONBody by its Content-Length).
func newBodyReader(resp *http.Response, field string) bodyReader {
	f, ok := newJSONField(field)
	if !ok {
		return nil
	}
	switch kindOf(resp.Header) {
	case jsonKind:
		if resp.ContentLength > MaxJSONBody {
			return nil
		}
		return &jsonBody{field: f, buf: make([]byte, 0, min(max(resp.ContentLength, 0), preallocJSON))}
	case sseKind:
		return newSSEBody(f)
	}
	return nil
}

// jsonBody buffers a JSON body, up to MaxJSONBody, and reads the field at its end.
type jsonBody struct {
	field jsonField
	buf   []byte
	over  bool // the body exceeded MaxJSONBody: buf was let go
}

func (j *jsonBody) write(p []byte) {
	if j.over {
		return
	}
	if len(j.buf)+len(p) > MaxJSONBody {
		j.over, j.buf = true, nil
		return
	}
	j.buf = appendBounded(j.buf, p, MaxJSONBody)
}

func (j *jsonBody) end() (int64, bool) {
	if j.over {
		return 0, false
	}
	n, state := j.field.read(j.buf)
	j.buf = nil
	return n, state == fieldCost
}

// sseBody parses an event stream and reads the field from each event's data: the last
// event holding it decides.
type sseBody struct {
	field  jsonField
	parser *sseParser
	cost   int64
	state  fieldState
}

// newSSEBody is an sseBody reading f.
func newSSEBody(f jsonField) *sseBody {
	s := &sseBody{field: f}
	s.parser = newSSEParser(s.event)
	return s
}

// event reads one event's data.
func (s *sseBody) event(data []byte) {
	if n, state := s.field.read(data); state != fieldAbsent {
		s.cost, s.state = n, state
	}
}

func (s *sseBody) write(p []byte) { s.parser.write(p) }

func (s *sseBody) end() (int64, bool) {
	s.parser.end()
	return s.cost, s.state == fieldCost
}
