package quarantine

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// serve returns a transport answering every request with body.
func serve(contentType string, status int, body io.ReadCloser, header http.Header) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		h := http.Header{"Content-Type": {contentType}}
		for k, v := range header {
			h[k] = v
		}
		return &http.Response{StatusCode: status, Header: h, Body: body, Request: req, ContentLength: -1}, nil
	})
}

func get(t *testing.T, rt http.RoundTripper, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const listURL = "https://api/apis/gateway.portico.dev/v1alpha1/apirules"

func TestRoundTripFiltersAList(t *testing.T) {
	body := list("gateway.portico.dev/v1alpha1", "APIRuleList", goodRule, badSpecRule)
	rt := New(testScheme, Options{Log: logr.Discard()}).Wrap(
		serve("application/json; charset=utf-8", http.StatusOK, io.NopCloser(strings.NewReader(body)), nil))
	resp := get(t, rt, listURL)
	out := readAll(t, resp)
	if strings.Contains(out, "bad-spec") || !strings.Contains(out, `"good"`) {
		t.Errorf("not filtered: %s", out)
	}
	if resp.ContentLength != int64(len(out)) || resp.Header.Get("Content-Length") != strconv.Itoa(len(out)) {
		t.Errorf("length %d / %q, body %d", resp.ContentLength, resp.Header.Get("Content-Length"), len(out))
	}
}

func TestRoundTripDecodesGzip(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(list("gateway.portico.dev/v1alpha1", "APIRuleList", goodRule, badSpecRule)))
	_ = zw.Close()
	rt := New(testScheme, Options{Log: logr.Discard()}).Wrap(serve("application/json", http.StatusOK,
		io.NopCloser(&zipped), http.Header{"Content-Encoding": {"gzip"}}))
	resp := get(t, rt, listURL)
	out := readAll(t, resp)
	if resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("still marked gzip")
	}
	if strings.Contains(out, "bad-spec") || !strings.Contains(out, `"good"`) {
		t.Errorf("not filtered: %s", out)
	}
}

func TestRoundTripPassesOthersThrough(t *testing.T) {
	bad := list("gateway.portico.dev/v1alpha1", "APIRuleList", badSpecRule)
	cases := []struct {
		name, contentType string
		status            int
		header            http.Header
	}{
		{name: "protobuf", contentType: "application/vnd.kubernetes.protobuf", status: http.StatusOK},
		{name: "CBOR", contentType: "application/cbor", status: http.StatusOK},
		{name: "error", contentType: "application/json", status: http.StatusNotFound},
		{name: "other encoding", contentType: "application/json", status: http.StatusOK, header: http.Header{"Content-Encoding": {"br"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := io.NopCloser(strings.NewReader(bad))
			resp := get(t, New(testScheme, Options{Log: logr.Discard()}).Wrap(serve(tc.contentType, tc.status, body, tc.header)), listURL)
			if resp.Body != body {
				t.Errorf("body replaced")
			}
		})
	}
}

func TestRoundTripHandsOnReadErrors(t *testing.T) {
	failing := io.NopCloser(io.MultiReader(strings.NewReader(`{"apiVersion":`), errReader{errors.New("connection reset")}))
	resp := get(t, New(testScheme, Options{Log: logr.Discard()}).Wrap(serve("application/json", http.StatusOK, failing, nil)), listURL)
	b, err := io.ReadAll(resp.Body)
	if string(b) != `{"apiVersion":` || err == nil || err.Error() != "connection reset" {
		t.Errorf("got %q, %v", b, err)
	}
}

// stepReader serves a stream in steps and records any read beyond the
// steps released so far, instead of blocking.
type stepReader struct {
	steps    []string
	released int
	next     int
	readMore bool
}

func (s *stepReader) Read(p []byte) (int, error) {
	if s.next >= len(s.steps) {
		return 0, io.EOF
	}
	if s.next >= s.released {
		s.readMore = true
		return 0, errors.New("read ahead of the consumer")
	}
	n := copy(p, s.steps[s.next])
	if n < len(s.steps[s.next]) {
		panic("test frames must fit one read")
	}
	s.next++
	return n, nil
}

func TestWatchIsFilteredFrameByFrame(t *testing.T) {
	frames := []string{
		frame("ADDED", goodRule),
		frame("ADDED", badSpecRule),
		frame("MODIFIED", badStatusRule),
		frame("MODIFIED", badSpecRule),
		frame("BOOKMARK", `{"apiVersion":"gateway.portico.dev/v1alpha1","kind":"APIRule","metadata":{"resourceVersion":"12"}}`),
	}
	src := &stepReader{}
	for _, f := range frames {
		src.steps = append(src.steps, f+"\n")
	}
	resp := get(t, New(testScheme, Options{Log: logr.Discard()}).Wrap(
		serve("application/json", http.StatusOK, io.NopCloser(src), nil)), listURL+"?watch=true&sendInitialEvents=true")
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	next := func() watchFrame {
		t.Helper()
		var ev watchFrame
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("decode: %v (read ahead: %v)", err, src.readMore)
		}
		return ev
	}
	want := []struct {
		release int // frames released before reading the next one out
		typ     string
		name    string
	}{
		{1, "ADDED", "good"},
		{3, "MODIFIED", "bad-status"}, // the bad ADDED in between is dropped
		{4, "DELETED", "bad-spec"},
		{5, "BOOKMARK", ""},
	}
	for _, w := range want {
		src.released = w.release
		ev := next()
		if string(ev.Type) != w.typ || identify(ev.Object).Name != w.name {
			t.Errorf("got %s %s, want %s %s", ev.Type, identify(ev.Object).Name, w.typ, w.name)
		}
		if src.next != w.release {
			t.Errorf("read %d frames for an output of %d", src.next, w.release)
		}
	}
	if src.readMore {
		t.Errorf("the stream was read ahead of its consumer")
	}
	if err := dec.Decode(&watchFrame{}); err != io.EOF {
		t.Errorf("end: %v", err)
	}
}

func TestReportsOncePerObjectVersion(t *testing.T) {
	var hooked []Report
	g := New(testScheme, Options{Log: logr.Discard(), OnQuarantine: func(r Report) { hooked = append(hooked, r) }})
	counter := quarantined.WithLabelValues("gateway.portico.dev", "APIRule", string(Dropped))
	before := value(t, counter)

	g.event([]byte(frame("ADDED", badSpecRule)))
	g.document([]byte(list("gateway.portico.dev/v1alpha1", "APIRuleList", badSpecRule))) // a relist
	newer := strings.Replace(badSpecRule, `"resourceVersion":"7"`, `"resourceVersion":"8"`, 1)
	g.event([]byte(frame("MODIFIED", newer)))

	if len(hooked) != 2 || hooked[0].ResourceVersion != "7" || hooked[1].ResourceVersion != "8" {
		t.Errorf("hook calls: %+v", hooked)
	}
	if got := value(t, counter) - before; got != 2 {
		t.Errorf("counter went up by %v, want 2", got)
	}
	if msg := hooked[0].Message(); !strings.Contains(msg, "APIRule bad-spec does not decode") || !strings.Contains(msg, "until it is fixed") {
		t.Errorf("message %q", msg)
	}
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
