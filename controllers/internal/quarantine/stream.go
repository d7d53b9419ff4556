package quarantine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// eventStream filters a JSON watch stream frame by frame: it reads one
// frame only when the previous one has been read, so it never holds more
// than one event.
//
// The API server writes one frame per line (encoding/json's compact
// output, which escapes every newline inside a string), so frames are cut
// at newlines without scanning them first: the filter's typed decode of a
// frame proves it one JSON value (filterLine's whole), and only a line it
// cannot prove so is scanned (json.Valid). A line that is not one JSON
// value (a producer that indents, or writes two values on a line) ends the
// cutting: from that line on, the stream is read with encoding/json's
// Decoder, as every stream was before (issue 45: BenchmarkWatchStream, the
// cutting alone costs about a fifth of the Decoder's scan of the same
// frames).
type eventStream struct {
	body   io.ReadCloser
	lines  *bufio.Reader // nil once the stream fell back to dec
	dec    *json.Decoder // nil while lines are cut
	filter filterLine
	// pending is the filtered frame being read.
	pending []byte
	// err is the stream's end or failure.
	err error
}

// filterLine filters one frame: what to pass on (nil drops it) and whether
// the frame is certainly one JSON value. Only when whole may the frame be
// passed on as is; otherwise out is ignored.
type filterLine func(frame []byte) (out []byte, whole bool)

func newEventStream(body io.ReadCloser, filter filterLine) *eventStream {
	return &eventStream{body: body, lines: bufio.NewReader(body), filter: filter}
}

// newDecoderStream is an eventStream that reads every frame with
// encoding/json's Decoder (the fallback, and the reference of the tests).
func newDecoderStream(body io.ReadCloser, filter filterLine) *eventStream {
	return &eventStream{body: body, dec: json.NewDecoder(body), filter: filter}
}

// Read implements io.Reader. Frames are passed on newline-terminated, as
// the API server writes them.
func (s *eventStream) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.dec != nil {
			s.decode()
		} else {
			s.cut()
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// decode reads the next frame with the Decoder.
func (s *eventStream) decode() {
	var frame json.RawMessage
	if err := s.dec.Decode(&frame); err != nil {
		s.err = err
		return
	}
	if out, _ := s.filter(frame); out != nil {
		s.pending = append(out, '\n')
	}
}

// cut reads the next line as a frame; a line that is no frame makes the
// Decoder read the stream from its first byte on.
func (s *eventStream) cut() {
	line, err := s.lines.ReadBytes('\n')
	if err != nil && err != io.EOF {
		// As the Decoder: a failed read ends the stream, with the frame it
		// interrupted.
		s.err = err
		return
	}
	frame := bytes.Trim(line, " \t\r\n")
	switch {
	case len(frame) > 0:
		out, whole := s.filter(frame)
		if !whole {
			s.dec = json.NewDecoder(io.MultiReader(bytes.NewReader(line), s.lines))
			s.lines = nil
			return
		}
		if out != nil {
			s.pending = append(out, '\n')
		}
	case err == nil:
		return // white space between frames
	}
	if err == io.EOF {
		s.err = err
	}
}

// Close implements io.Closer; it ends the watch.
func (s *eventStream) Close() error { return s.body.Close() }
