package responsecost

import "bytes"

// lineState is where the SSE parser is within a line.
type lineState uint8

const (
	// inName: reading the field name, up to the first ':'.
	inName lineState = iota
	// afterColon: just past a data field's ':', where one space is skipped.
	afterColon
	// inData: reading a data field's value.
	inData
	// ignoring: the rest of the line is no data (another field, or a comment).
	ignoring
)

// bom is the UTF-8 byte order mark a stream may start with (it is ignored).
const bom = "\uFEFF"

// keepDataCap is the largest data buffer kept for the next event: a larger one, grown by
// one big event, is let go.
const keepDataCap = 64 << 10

// sseParser reads a text/event-stream incrementally (HTML Living Standard, "Event stream
// interpretation"), holding one event's data at a time, at most MaxEventData of it. Lines
// end in "\n", "\r\n" or "\r"; only data fields matter (event, id, retry and comments are
// skipped), and each dispatched event's data goes to onEvent.
type sseParser struct {
	onEvent func(data []byte)
	data    []byte // the event's data lines so far, each followed by "\n"
	dropped bool   // the event's data exceeded MaxEventData
	// The line in progress.
	state   lineState
	name    [len(bom) + len("data")]byte
	nameLen int
	empty   bool // no byte of the line read yet
	started bool // a line has been read before (only the first may start with a BOM)
	lastCR  bool // the last line ended in "\r": a "\n" right after it ends nothing
}

// newSSEParser is a parser that hands each event's data to onEvent.
func newSSEParser(onEvent func(data []byte)) *sseParser {
	return &sseParser{onEvent: onEvent, empty: true}
}

// write parses the next bytes of the stream.
func (p *sseParser) write(b []byte) {
	ends := lineEnds{b: b, lf: unknown, cr: unknown}
	for pos := 0; pos < len(b); {
		if p.lastCR {
			p.lastCR = false
			if b[pos] == '\n' {
				pos++
				continue
			}
		}
		end := ends.next(pos)
		if end < 0 {
			p.text(b[pos:])
			return
		}
		p.text(b[pos:end])
		p.endLine()
		p.lastCR = b[end] == '\r'
		pos = end + 1
	}
}

// unknown is a lineEnds index not searched for yet.
const unknown = -2

// lineEnds finds the line ends of one chunk of the stream in order, scanning it at most
// once for '\n' and once for '\r' (searching afresh for both at every line would be
// quadratic in a chunk of many "\r" and no "\n").
type lineEnds struct {
	b      []byte
	lf, cr int // the next '\n' and '\r' found, -1 for none, or unknown
}

// next is the index of the first line end at or after from, or -1.
func (e *lineEnds) next(from int) int {
	e.lf = nextIndex(e.b, from, '\n', e.lf)
	e.cr = nextIndex(e.b, from, '\r', e.cr)
	switch {
	case e.lf < 0:
		return e.cr
	case e.cr < 0:
		return e.lf
	}
	return min(e.lf, e.cr)
}

// nextIndex is the index of the first c in b at or after from, or -1, given known: the
// last answer, still good when it is -1 or at or after from.
func nextIndex(b []byte, from int, c byte, known int) int {
	if known == -1 || known >= from {
		return known
	}
	if i := bytes.IndexByte(b[from:], c); i >= 0 {
		return from + i
	}
	return -1
}

// end finishes the stream: a line without its end is ended, and the pending event is
// dispatched.
func (p *sseParser) end() {
	if !p.empty {
		p.endLine()
	}
	p.dispatch()
}

// text parses part of a line (no line end in it).
func (p *sseParser) text(s []byte) {
	if len(s) > 0 {
		p.empty = false
	}
	for len(s) > 0 {
		switch p.state {
		case inName:
			s = p.readName(s)
		case afterColon:
			if s[0] == ' ' {
				s = s[1:]
			}
			p.state = inData
		case inData:
			p.appendData(s)
			return
		default: // ignoring
			return
		}
	}
}

// readName reads the field name from s and returns the rest of s past the ':', if any.
func (p *sseParser) readName(s []byte) []byte {
	i := bytes.IndexByte(s, ':')
	part := s
	if i >= 0 {
		part = s[:i]
	}
	if p.nameLen+len(part) > len(p.name) {
		p.state = ignoring // too long for "data", even after a BOM
		return nil
	}
	p.nameLen += copy(p.name[p.nameLen:], part)
	if i < 0 {
		return nil
	}
	if p.isData() {
		p.state = afterColon
	} else {
		p.state = ignoring
	}
	return s[i+1:]
}

// isData says whether the field name read is "data".
func (p *sseParser) isData() bool {
	name := string(p.name[:p.nameLen])
	return name == "data" || (!p.started && name == bom+"data")
}

// endLine handles the line just ended: a blank line dispatches the event; a data line
// (with a value, or "data" alone) adds its value and "\n" to the event's data.
func (p *sseParser) endLine() {
	switch {
	case p.empty:
		p.dispatch()
	case p.state == inData || p.state == afterColon || (p.state == inName && p.isData()):
		p.appendData([]byte{'\n'})
	}
	p.state, p.nameLen, p.empty, p.started = inName, 0, true, true
}

// appendData adds s to the event's data, or drops the event once its data would exceed
// MaxEventData (the trailing "\n" aside).
func (p *sseParser) appendData(s []byte) {
	if p.dropped {
		return
	}
	if len(p.data)+len(s) > MaxEventData+1 {
		p.dropped, p.data = true, nil
		return
	}
	p.data = appendBounded(p.data, s, MaxEventData+1)
}

// dispatch hands the pending event's data, without its last "\n", to onEvent, unless it
// has none or was dropped, and starts the next event.
func (p *sseParser) dispatch() {
	if !p.dropped && len(p.data) > 0 {
		p.onEvent(p.data[:len(p.data)-1])
	}
	p.dropped = false
	if cap(p.data) > keepDataCap {
		p.data = nil
	} else {
		p.data = p.data[:0]
	}
}
