package quarantine

import (
	"bytes"
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Options configure a Guard.
type Options struct {
	// Log receives one line per quarantined object version;
	// ctrl.Log.WithName("quarantine") when unset.
	Log logr.Logger
	// OnQuarantine, when set, is called once per quarantined object version
	// (UID, resourceVersion and reason), e.g. to record an Event on it. It
	// runs on the request's goroutine and must not block.
	OnQuarantine func(Report)
	// Slim, when set, is given the object of every watch event that the
	// guard's own typed decode accepted (ADDED, MODIFIED, DELETED); when it
	// returns an object, that object, encoded as JSON, is passed on in the
	// event instead of the one the API server sent. It lets a cache that
	// keeps only part of an object (a digest of its spec, say) have the
	// object decoded whole once, here, while the client decodes only what
	// is kept. It must return a new object or obj itself changed, of obj's
	// kind, and nil for objects it leaves as they are; it runs on the
	// watch's goroutine. Lists, single objects and the answers to writes
	// are never slimmed.
	Slim func(obj runtime.Object) runtime.Object
	// Handoff, when set, holds the object of every good ADDED and MODIFIED
	// watch event of the kinds it names, as the guard decoded it, and
	// passes on a placeholder that the caches' Handoff.Transform replaces
	// by it: one decode of the whole object per event, the guard's. An
	// object Slim slims is not handed off.
	Handoff *Handoff
	// WithoutManagedFields, when set, removes metadata.managedFields from
	// the object of every watch event before the guard checks it and
	// passes it on, so that neither the guard nor the client decodes them:
	// for processes whose caches drop them anyway
	// (cache.TransformStripManagedFields) and whose watches have no other
	// reader. Issue 45: they were about two fifths of the bytes of an
	// APIRule's or a policy's watch event, decoded twice. An event the
	// removal is not sure of (an escaped key, a key twice, another shape)
	// passes whole. Lists, single objects and the answers to writes keep
	// them.
	WithoutManagedFields bool
}

// Guard filters undecodable objects out of the API server's JSON responses.
// Install it with rest.Config.Wrap(guard.Wrap).
type Guard struct {
	filter filter
	log    logr.Logger
	hook   func(Report)
	seen   seen
}

// New returns a Guard for the kinds registered in scheme.
func New(scheme *runtime.Scheme, opts Options) *Guard {
	log := opts.Log
	if log.GetSink() == nil {
		log = ctrl.Log.WithName("quarantine")
	}
	f := newFilter(scheme)
	f.slim = opts.Slim
	f.handoff = opts.Handoff
	f.withoutManagedFields = opts.WithoutManagedFields
	return &Guard{filter: f, log: log, hook: opts.OnQuarantine}
}

// Wrap wraps an HTTP transport; it is a transport.WrapperFunc.
func (g *Guard) Wrap(next http.RoundTripper) http.RoundTripper {
	return &roundTripper{guard: g, next: next}
}

// report counts, logs and hands on the reports not made before.
func (g *Guard) report(reports []Report) {
	for _, r := range reports {
		if !g.seen.first(r.key()) {
			continue
		}
		quarantined.WithLabelValues(r.GVK.Group, r.GVK.Kind, string(r.Reason)).Inc()
		g.log.Info("Quarantined an object that does not decode", "group", r.GVK.Group, "kind", r.GVK.Kind,
			"namespace", r.Namespace, "name", r.Name, "uid", r.UID, "resourceVersion", r.ResourceVersion,
			"reason", r.Reason, "error", r.Err)
		if g.hook != nil {
			g.hook(r)
		}
	}
}

// document filters a whole response body and reports what it set aside.
func (g *Guard) document(body []byte) []byte {
	out, reports := g.filter.document(body)
	g.report(reports)
	return out
}

// event filters one watch frame and reports what it set aside.
func (g *Guard) event(frame []byte) []byte {
	out, reports := g.filter.event(frame)
	g.report(reports)
	return out
}

// line filters one line of a watch stream as a frame (filter.line) and
// reports what it set aside.
func (g *Guard) line(frame []byte) ([]byte, bool) {
	out, reports, whole := g.filter.line(frame)
	g.report(reports)
	return out, whole
}

// roundTripper is the Guard installed on a transport.
type roundTripper struct {
	guard *Guard
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || !inspectable(req, resp) {
		return resp, err
	}
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		if err := gunzip(resp); err != nil {
			resp.Body.Close()
			return nil, err
		}
	}
	if isWatch(req) {
		resp.Body = newEventStream(resp.Body, t.guard.line)
		setLength(resp, -1)
		return resp, nil
	}
	body, readErr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if readErr != nil {
		// Hand on what came and the error, as the client would have seen it.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{readErr}))
		setLength(resp, -1)
		return resp, nil
	}
	out := t.guard.document(body)
	resp.Body = io.NopCloser(bytes.NewReader(out))
	setLength(resp, int64(len(out)))
	return resp, nil
}

// WrappedRoundTripper lets client-go reach the transport below (to close
// idle connections, for instance).
func (t *roundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }

// inspectable reports whether a response may carry objects to filter: a
// successful JSON response with a body. Protobuf, CBOR and the like, and
// errors (a Status), pass untouched.
func inspectable(req *http.Request, resp *http.Response) bool {
	if req.Method == http.MethodHead || resp.StatusCode < 200 || resp.StatusCode > 299 ||
		resp.StatusCode == http.StatusNoContent || resp.Body == nil || resp.Body == http.NoBody {
		return false
	}
	mediaType, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return false
	}
	enc := resp.Header.Get("Content-Encoding")
	return enc == "" || strings.EqualFold(enc, "gzip") || strings.EqualFold(enc, "identity")
}

// isWatch reports whether req asks for a watch stream (including a
// WatchList's initial events).
func isWatch(req *http.Request) bool {
	if watch, err := strconv.ParseBool(req.URL.Query().Get("watch")); err == nil && watch {
		return true
	}
	// The deprecated /watch/ paths: /api/v1/watch/..., /apis/<g>/<v>/watch/...
	return strings.Contains(req.URL.Path, "/watch/")
}

// gunzip replaces a gzip-encoded body by its decoded stream.
func gunzip(resp *http.Response) error {
	compressed := resp.Body
	zr, err := gzip.NewReader(compressed)
	if err != nil {
		return err
	}
	resp.Body = readCloser{Reader: zr, close: func() error {
		_ = zr.Close() // only reports a checksum error, which Read already has
		return compressed.Close()
	}}
	resp.Header.Del("Content-Encoding")
	resp.Uncompressed = true
	setLength(resp, -1)
	return nil
}

func setLength(resp *http.Response, n int64) {
	resp.ContentLength = n
	if n < 0 {
		resp.Header.Del("Content-Length")
	} else {
		resp.Header.Set("Content-Length", strconv.FormatInt(n, 10))
	}
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
