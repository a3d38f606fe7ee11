package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxLength bounds a bulk string or an aggregate's element count the proxy accepts (Redis's
// own proto-max-bulk-len default is 512 MB; tests send far less).
const maxLength = 64 << 20

// readCommand reads one client command: its raw bytes and its arguments, the name first in
// upper case. Clients send a RESP array of bulk strings; an inline command (one line) is
// accepted too.
func readCommand(r *bufio.Reader) (raw []byte, args []string, err error) {
	var buf bytes.Buffer
	line, err := readLine(r, &buf)
	if err != nil {
		return nil, nil, err
	}
	if len(line) == 0 || line[0] != '*' {
		args = strings.Fields(string(line))
	} else {
		n, err := parseLength(line[1:])
		if err != nil {
			return nil, nil, err
		}
		for i := range n {
			arg, err := readBulk(r, &buf)
			if err != nil {
				return nil, nil, fmt.Errorf("command argument %d: %w", i, err)
			}
			args = append(args, string(arg))
		}
	}
	if len(args) > 0 {
		args[0] = strings.ToUpper(args[0])
	}
	return buf.Bytes(), args, nil
}

// readBulk reads one bulk string ($len CRLF data CRLF) into buf and returns its data.
func readBulk(r *bufio.Reader, buf *bytes.Buffer) ([]byte, error) {
	line, err := readLine(r, buf)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '$' {
		return nil, fmt.Errorf("want a bulk string, got %q", line)
	}
	n, err := parseLength(line[1:])
	if err != nil || n < 0 {
		return nil, err
	}
	start := buf.Len()
	if err := copyN(r, buf, n+2); err != nil {
		return nil, err
	}
	return buf.Bytes()[start : start+n], nil
}

// readReply reads one complete server reply, RESP2 or RESP3, and returns its raw bytes. An
// attribute (|) is returned together with the reply it annotates.
func readReply(r *bufio.Reader) ([]byte, error) {
	var buf bytes.Buffer
	if err := readValue(r, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readValue appends one RESP value to buf.
func readValue(r *bufio.Reader, buf *bytes.Buffer) error {
	line, err := readLine(r, buf)
	if err != nil {
		return err
	}
	if len(line) == 0 {
		return errors.New("empty reply line")
	}
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '!', '=': // blob string, blob error, verbatim string
		n, err := parseLength(line[1:])
		if err != nil || n < 0 {
			return err
		}
		return copyN(r, buf, n+2)
	case '*', '~', '>': // array, set, push
		return readElements(r, buf, line[1:], 1)
	case '%': // map
		return readElements(r, buf, line[1:], 2)
	case '|': // attribute, then the value it annotates
		if err := readElements(r, buf, line[1:], 2); err != nil {
			return err
		}
		return readValue(r, buf)
	default:
		return fmt.Errorf("unknown reply type %q", line[0])
	}
}

// readElements reads count (from header) times perItem values.
func readElements(r *bufio.Reader, buf *bytes.Buffer, header []byte, perItem int) error {
	n, err := parseLength(header)
	if err != nil {
		return err
	}
	for range n * perItem { // a null aggregate (-1) has no elements
		if err := readValue(r, buf); err != nil {
			return err
		}
	}
	return nil
}

// readLine appends one CRLF-terminated line to buf and returns it without the CRLF.
func readLine(r *bufio.Reader, buf *bytes.Buffer) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	start := buf.Len()
	buf.Write(line)
	return bytes.TrimRight(buf.Bytes()[start:], "\r\n"), nil
}

// copyN appends exactly n bytes from r to buf.
func copyN(r *bufio.Reader, buf *bytes.Buffer, n int) error {
	if _, err := io.CopyN(buf, r, int64(n)); err != nil {
		return fmt.Errorf("short payload: %w", err)
	}
	return nil
}

// parseLength parses a RESP length or count: -1 (null) or 0..maxLength.
func parseLength(b []byte) (int, error) {
	n, err := strconv.Atoi(string(b))
	if err != nil || n < -1 || n > maxLength {
		return 0, fmt.Errorf("bad RESP length %q", b)
	}
	return n, nil
}
