package quarantine

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/go-logr/logr"
)

// indented is frame written with indentation, so over many lines: a
// stream the API server does not write, which the cutting hands to the
// Decoder.
func indented(t testing.TB, typ, obj string) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(frame(typ, obj)), "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// streamOf is every byte a stream passes on, and how it ended.
func streamOf(s *eventStream) ([]byte, error) {
	out, err := io.ReadAll(s)
	if err == nil {
		err = io.EOF // ReadAll hides the EOF that ended it
	}
	return out, err
}

// lineStream and decoderStream are the guard's two ways of reading a watch
// stream, with g's filter.
func lineStream(g *Guard, body string) *eventStream {
	return newEventStream(io.NopCloser(iotest.HalfReader(strings.NewReader(body))), g.line)
}

func decoderStream(g *Guard, body string) *eventStream {
	return newDecoderStream(io.NopCloser(iotest.HalfReader(strings.NewReader(body))), func(frame []byte) ([]byte, bool) {
		return g.event(frame), true
	})
}

// TestLinesAreCutWithoutADecoder: a stream as the API server writes it is
// cut at its newlines and filtered exactly as the Decoder reads it (the
// same bytes out, a bad object dropped or repaired alike), without ever
// falling back; an indented frame, a line of two frames, a frame cut off
// by the stream's end make the rest of the stream go through the Decoder,
// and still come out as the Decoder reads them, bad objects filtered.
func TestLinesAreCutWithoutADecoder(t *testing.T) {
	g := New(testScheme, Options{Log: logr.Discard()})
	api := []string{
		frame("ADDED", goodRule), frame("ADDED", badSpecRule), frame("MODIFIED", badStatusRule),
		frame("MODIFIED", goodVirtualSvc), frame("MODIFIED", badVirtualSvc), frame("ADDED", service("svc", `[{"port":80}]`)),
		frame("BOOKMARK", `{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRule","metadata":{"resourceVersion":"12"}}`),
		frame("ERROR", `{"kind":"Status","apiVersion":"v1","status":"Failure","code":410}`),
	}
	cases := []struct {
		name     string
		body     string
		fellBack bool
	}{
		{"the API server's lines", strings.Join(api, "\n") + "\n", false},
		{"white space and CRLF between lines", "\n" + strings.Join(api, "\r\n") + "\n\n  \n", false},
		{"no newline at the end", strings.Join(api, "\n"), false},
		{"an indented frame with a bad object", api[0] + "\n" + indented(t, "MODIFIED", badStatusRule) + "\n" + strings.Join(api[1:], "\n") + "\n", true},
		{"two frames on a line", api[0] + "\n" + api[1] + api[2] + "\n" + api[4] + "\n", true},
		{"a frame cut off", api[0] + "\n" + api[4][:len(api[4])/2], true},
		{"not JSON", api[0] + "\n" + "{not json}\n" + api[1] + "\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := lineStream(g, tc.body)
			got, gotErr := streamOf(lines)
			want, wantErr := streamOf(decoderStream(g, tc.body))
			if !bytes.Equal(got, want) {
				t.Errorf("cut at lines:\n%s\nread by the Decoder:\n%s", got, want)
			}
			if (gotErr == io.EOF) != (wantErr == io.EOF) {
				t.Errorf("ended with %v, the Decoder with %v", gotErr, wantErr)
			}
			if fellBack := lines.dec != nil; fellBack != tc.fellBack {
				t.Errorf("fell back to the Decoder: %v, want %v", fellBack, tc.fellBack)
			}
			for _, bad := range []string{`"hosts":5`, `"not-a-number"`, badTime} {
				if bytes.Contains(got, []byte(bad)) {
					t.Errorf("a bad object was passed on (%s)", bad)
				}
			}
		})
	}
}

// TestAReadErrorEndsTheStream: a failed read ends the stream with its
// error, as the Decoder's does, after the frames before it.
func TestAReadErrorEndsTheStream(t *testing.T) {
	g := New(testScheme, Options{Log: logr.Discard()})
	broken := errors.New("connection reset")
	body := io.MultiReader(strings.NewReader(frame("ADDED", goodRule)+"\n"+frame("ADDED", goodVirtualSvc)[:40]), errReader{broken})
	out, err := io.ReadAll(newEventStream(io.NopCloser(body), g.line))
	if !errors.Is(err, broken) {
		t.Errorf("ended with %v, want %v", err, broken)
	}
	if string(out) != frame("ADDED", goodRule)+"\n" {
		t.Errorf("passed on %s", out)
	}
}

// FuzzEventStream checks the cutting of a watch stream at its newlines
// against encoding/json's Decoder: for any stream, the same bytes come out
// (so the same frames, filtered alike) and it ends the same way.
func FuzzEventStream(f *testing.F) {
	seeds := []string{
		frame("ADDED", goodRule) + "\n" + frame("MODIFIED", badStatusRule) + "\n",
		frame("ADDED", badSpecRule) + "\n" + frame("DELETED", badVirtualSvc),
		frame("MODIFIED", goodVirtualSvc) + "\r\n\n" + frame("ADDED", goodGateway) + frame("ADDED", badGateway) + "\n",
		indented(f, "MODIFIED", badStatusRule) + "\n" + frame("ADDED", goodRule) + "\n",
		`{"type":"ADDED","object":` + goodRule + `,"type":"BOOKMARK"}` + "\n",
		"1 2\n\"x\"\n[]\n{}\n",
		frame("ADDED", goodRule)[:30],
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	g := New(testScheme, Options{Log: logr.Discard()})
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotErr := streamOf(lineStream(g, string(body)))
		want, wantErr := streamOf(decoderStream(g, string(body)))
		if !bytes.Equal(got, want) {
			t.Errorf("cut at lines:\n%q\nread by the Decoder:\n%q", got, want)
		}
		if (gotErr == io.EOF) != (wantErr == io.EOF) {
			t.Errorf("ended with %v, the Decoder with %v", gotErr, wantErr)
		}
	})
}

// BenchmarkWatchStream is a watch stream of VirtualService events (eight
// rules each, as the apirule controller writes them) cut at its lines and
// read by the Decoder: through the guard's filter, and with a filter that
// passes every frame on (the cutting alone). Compare them in the same run.
func BenchmarkWatchStream(b *testing.B) {
	g := New(testScheme, Options{Log: logr.Discard()})
	var body strings.Builder
	const events = 100
	for range events {
		body.WriteString(frame("MODIFIED", benchVirtualService(b)) + "\n")
	}
	passOn := func(frame []byte) ([]byte, bool) { return frame, true }
	for _, s := range []struct {
		name string
		open func(string) *eventStream
	}{
		{"guard/lines", func(body string) *eventStream { return lineStream(g, body) }},
		{"guard/decoder", func(body string) *eventStream { return decoderStream(g, body) }},
		{"cut/lines", func(body string) *eventStream { return newEventStream(io.NopCloser(strings.NewReader(body)), passOn) }},
		{"cut/decoder", func(body string) *eventStream { return newDecoderStream(io.NopCloser(strings.NewReader(body)), passOn) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(body.Len()))
			for b.Loop() {
				out, err := io.ReadAll(s.open(body.String()))
				if err != nil || len(out) != body.Len() {
					b.Fatalf("%d bytes of %d: %v", len(out), body.Len(), err)
				}
			}
		})
	}
}
