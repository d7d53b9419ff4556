package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/portico-dev/portico/e2e/envoy"
	"github.com/portico-dev/portico/e2e/xds"
)

// The gateway stand-in's listeners are istiod's: every Listener istiod
// sends is bound on its socket address's port (istiod gives a Gateway
// server the gateway Service's target port, or the server's own port when
// no Service selects the pods, as for Envoy), and one no longer sent is
// closed. A connection is TLS or plain text by its first byte, as Envoy's
// tls_inspector tells them apart; a TLS handshake gets the chain its SNI
// picks. The status listener (--status-addr, Istio's 15021) answers
// /healthz/ready 200 once istiod has sent listeners and all of them are
// bound, 503 with the reason before.

// boundListener is one of istiod's listeners, bound.
type boundListener struct {
	name string
	srv  *http.Server
	ln   net.Listener
}

// listenerSet holds the bound listeners by port.
type listenerSet struct {
	mu    sync.Mutex
	bound map[uint32]*boundListener
	// notReady says why the stand-in is not ready ("" when it is).
	notReady string
}

// listenerPorts are the ports of a snapshot's listeners, by port, with
// the listener's name.
func listenerPorts(s *xds.Snapshot) map[uint32]string {
	out := map[uint32]string{}
	for name, l := range s.Listeners {
		if p := l.GetAddress().GetSocketAddress().GetPortValue(); p != 0 {
			out[p] = name
		}
	}
	return out
}

// syncListeners binds the listeners of snap not bound yet and closes the
// bound ones snap no longer has; it records whether the stand-in is
// ready (every listener bound).
func (g *xdsGateway) syncListeners(ctx context.Context, snap *xds.Snapshot) {
	want := listenerPorts(snap)
	ls := &g.listeners
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.bound == nil {
		ls.bound = map[uint32]*boundListener{}
	}
	for port, b := range ls.bound {
		if _, ok := want[port]; !ok {
			log.Printf("xds: listener %s on %d removed by istiod; closing it", b.name, port)
			shutdown, cancel := context.WithTimeout(ctx, 2*time.Second)
			_ = b.srv.Shutdown(shutdown)
			cancel()
			delete(ls.bound, port)
		}
	}
	var failed []string
	for _, port := range slicesSorted(want) {
		if _, ok := ls.bound[port]; ok {
			continue
		}
		b, err := g.bind(port, want[port])
		if err != nil {
			failed = append(failed, fmt.Sprintf("listener %s: %v", want[port], err))
			continue
		}
		ls.bound[port] = b
	}
	switch {
	case len(want) == 0:
		ls.notReady = "istiod has sent no listener yet"
	case len(failed) > 0:
		ls.notReady = strings.Join(failed, "; ")
		log.Printf("xds: %s", ls.notReady)
	default:
		ls.notReady = ""
	}
}

func slicesSorted(m map[uint32]string) []uint32 {
	out := make([]uint32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// bind listens on port and serves istiod's listener there.
func (g *xdsGateway) bind(port uint32, name string) (*boundListener, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(int(port)))
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		return g.configForClient(port, hello)
	}}
	srv := &http.Server{Handler: &xdsListener{g: g, port: port}, ReadHeaderTimeout: 10 * time.Second}
	sniffing := newSniffingListener(ln, cfg)
	go func() {
		if err := srv.Serve(sniffing); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("xds: listener %s on %d: %v", name, port, err)
		}
	}()
	log.Printf("xds: listening on %d for istiod's listener %s", port, name)
	return &boundListener{name: name, srv: srv, ln: ln}, nil
}

// closeAll closes every bound listener.
func (g *xdsGateway) closeAll() {
	ls := &g.listeners
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for port, b := range ls.bound {
		_ = b.srv.Close()
		delete(ls.bound, port)
	}
}

// ServeHTTP is the status listener: /healthz/ready.
func (ls *listenerSet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/healthz/ready" {
		http.NotFound(w, r)
		return
	}
	ls.mu.Lock()
	why := ls.notReady
	ls.mu.Unlock()
	if why != "" {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// sniffingListener hands http.Server each accepted connection as a TLS
// server connection when its first byte is a TLS handshake record (0x16),
// as it came otherwise. The first byte is read off the accept path, so a
// silent client holds up no other.
type sniffingListener struct {
	net.Listener
	cfg   *tls.Config
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error
}

func newSniffingListener(ln net.Listener, cfg *tls.Config) *sniffingListener {
	s := &sniffingListener{Listener: ln, cfg: cfg, conns: make(chan net.Conn), done: make(chan struct{})}
	go s.acceptLoop()
	return s
}

func (s *sniffingListener) acceptLoop() {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			s.err = err
			s.once.Do(func() { close(s.done) })
			return
		}
		go s.sniff(c)
	}
}

// sniff reads the first byte of c (within 10 s) and queues it.
func (s *sniffingListener) sniff(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		_ = c.Close()
		return
	}
	var conn net.Conn = &peekedConn{Conn: c, r: br}
	if first[0] == 0x16 {
		conn = tls.Server(conn, s.cfg)
	}
	select {
	case s.conns <- conn:
	case <-s.done:
		_ = conn.Close()
	}
}

func (s *sniffingListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, s.err
	}
}

func (s *sniffingListener) Close() error {
	err := s.Listener.Close()
	s.once.Do(func() { close(s.done) })
	return err
}

// peekedConn reads what was peeked first.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// hasPlainChain reports whether a plain-text connection to l finds a
// chain: one without server names that terminates no TLS.
func hasPlainChain(l *listenerv3.Listener) bool {
	fc := envoy.ChainForSNI(l, "")
	return fc != nil && envoy.DownstreamTLS(fc) == nil
}
