package quarantine

import (
	"encoding/json"
	"io"
)

// eventStream filters a JSON watch stream frame by frame: it reads one
// frame only when the previous one has been read, so it never holds more
// than one event.
type eventStream struct {
	body    io.ReadCloser
	dec     *json.Decoder
	filter  func(frame []byte) []byte // nil drops the frame
	pending []byte                    // the filtered frame being read
	err     error                     // the stream's end or failure
}

func newEventStream(body io.ReadCloser, filter func([]byte) []byte) *eventStream {
	return &eventStream{body: body, dec: json.NewDecoder(body), filter: filter}
}

// Read implements io.Reader. Frames are passed on newline-terminated, as
// the API server writes them.
func (s *eventStream) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		var frame json.RawMessage
		if err := s.dec.Decode(&frame); err != nil {
			s.err = err
			continue
		}
		if out := s.filter(frame); out != nil {
			s.pending = append(out, '\n')
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// Close implements io.Closer; it ends the watch.
func (s *eventStream) Close() error { return s.body.Close() }
