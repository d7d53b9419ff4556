// Command e2e-agent is the e2e suite's in-cluster helper on the node target,
// one small static binary (image e2e-agent, built by hack/release/cmd/images) with three
// roles:
//
//	e2e-agent backend --name NAME     an HTTP server answering every request
//	                                  with "NAME METHOD PATH" (a Service's pods);
//	                                  with --workload-labels it also stands in
//	                                  for the pods' Istio sidecar's external
//	                                  authorization: the CUSTOM
//	                                  AuthorizationPolicies selecting it ask
//	                                  the mesh config's envoyExtAuthzHttp
//	                                  provider first (extauth.go)
//	e2e-agent gateway --gateway NS/N  a minimal stand-in for an Istio ingress
//	                                  gateway, for the kind target, which runs
//	                                  no istiod (--gateway may be repeated: one
//	                                  workload serves every Gateway that
//	                                  selects it, as Istio's does); it reads
//	                                  the Gateways and the VirtualServices
//	                                  bound to them through the API (with its
//	                                  pod's ServiceAccount token), serves the
//	                                  Gateways' HTTP servers on --listen and
//	                                  their HTTPS servers on --https-addr, and
//	                                  proxies each request to the destination
//	                                  of the first route whose host, path and
//	                                  method match, or answers 404
//	e2e-agent gateway --xds ADDR      the stand-in programmed by istiod, on
//	                                  the node target: listeners (bound on
//	                                  istiod's ports), routes, endpoints, TLS
//	                                  references and rate-limit filters over
//	                                  ADS as the gateway's Envoy; it reads no
//	                                  Gateway or VirtualService
//	                                  (xdsgateway.go, xdslisteners.go,
//	                                  xdsratelimit.go)
//	e2e-agent backend --xds ADDR      a backend whose sidecar stand-in
//	                                  enforces the inbound RBAC, jwt_authn
//	                                  and ext_authz filters istiod sends
//	                                  (xdssidecar.go)
//	e2e-agent get URL                 a client that retries a request until
//	                                  it gets the expected answer, or (--loop)
//	                                  keeps sending it and counts the answers
//
// Without --xds, the gateway implements only the part of a Gateway and a
// VirtualService the suite needs: servers by protocol (HTTP on the plain listener, HTTPS with
// tls.mode SIMPLE, MUTUAL or OPTIONAL_MUTUAL and tls.credentialName on the
// TLS listener, client CAs as Istio finds them: clientcerts.go), their hosts,
// tls.httpsRedirect; VirtualService hosts, exact/prefix/regex URI, method
// regex, destination host and port, directResponse. Hosts are matched as
// Istio does: "*" matches every name, "*.example.com" every name ending in
// .example.com, and the most specific server and VirtualService host wins.
// The certificate of an HTTPS server is the kubernetes.io/tls Secret its
// credentialName names in the Gateway's namespace (Istio reads it from the
// gateway pods' namespace, the same one here), re-read every --refresh. It
// is not Envoy and enforces no AuthorizationPolicy or RequestAuthentication
// (a backend with --workload-labels applies the CUSTOM ones selecting it,
// as its sidecar would: extauth.go says what of Envoy's ext_authz it
// imitates).
// With --workload-namespace and --workload-labels it applies the global
// rate limits of the EnvoyFilters that reach its pods as Envoy's global
// rate limit filter would (ratelimit.go): descriptors from the filters'
// rate limit actions, a call to the rate-limit service their cluster names,
// 429 over the limit, the filter's failure mode when the service cannot
// answer.
// That is enough to prove that the Istio objects Portico's controllers write
// route real traffic, over HTTPS with the certificate they chose.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: e2e-agent backend|gateway|get ...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "backend":
		err = backend(ctx, os.Args[2:])
	case "gateway":
		err = gateway(ctx, os.Args[2:])
	case "get":
		err = get(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown role %q", os.Args[1])
	}
	if err != nil {
		log.Printf("e2e-agent %s: %v", os.Args[1], err)
		os.Exit(1)
	}
}

// run serves srv (over TLS with srv.TLSConfig when useTLS) until ctx ends.
func run(ctx context.Context, srv *http.Server, useTLS bool) error {
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("listening on %s (TLS %t)", srv.Addr, useTLS)
	var err error
	if useTLS {
		err = srv.ListenAndServeTLS("", "") // the certificates come from TLSConfig.GetCertificate
	} else {
		err = srv.ListenAndServe()
	}
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func backend(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	name := fs.String("name", "backend", "name in every answer")
	addr := fs.String("listen", ":8080", "listen address")
	var wl workload
	fs.StringVar(&wl.namespace, "workload-namespace", "", "namespace of the backend's pods: with --workload-labels, the CUSTOM AuthorizationPolicies selecting them are applied as a sidecar would (extauth.go)")
	labels := fs.String("workload-labels", "", "labels of the backend's pods, k=v,k=v")
	fs.StringVar(&wl.root, "root-namespace", "istio-system", "Istio's root namespace")
	mesh := fs.String("mesh-config", "istio-system/istio", "namespace/name of the ConfigMap holding the mesh config (key mesh), where the extension providers are")
	xdsAddr := fs.String("xds", "", "istiod's plaintext xDS address host:port: enforce the RBAC, jwt_authn and ext_authz filters istiod sends the pod's sidecar for --listen's port (a sidecar node of this pod; xdssidecar.go) instead of reading CUSTOM policies")
	peerIdentity := fs.String("peer-identity", "pods", "with --xds: how a peer's identity is learnt without mutual TLS: pods (the ServiceAccount of the pod with the peer's address, through the API) or none")
	peerNamespaces := fs.String("peer-namespaces", "", "with --peer-identity pods: the namespaces, ns,ns, where peers' pods are looked for (default all: the token must then list pods cluster-wide)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", *name)
		fmt.Fprintf(w, "%s %s %s\n", *name, r.Method, r.URL.Path)
		// Asked with X-Echo-Headers, then the request's headers, sorted, one
		// "Name: value" line each: the e2e reads what the gateway set on
		// the way. Without it the answer is the one line.
		if r.Header.Get("X-Echo-Headers") == "" {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(r.Header)) {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ","))
		}
	})
	if *xdsAddr != "" {
		wl.labels = parseLabels(*labels)
		var namespaces []string
		if *peerNamespaces != "" {
			namespaces = strings.Split(*peerNamespaces, ",")
		}
		sc, err := newXDSSidecar(*xdsAddr, wl, *addr, *peerIdentity, namespaces)
		if err != nil {
			return err
		}
		go func() {
			if err := sc.xds.Run(ctx); err != nil {
				log.Printf("xds: %v", err)
			}
		}()
		// As Envoy, the pod is ready (listens) once istiod configured
		// its inbound listener.
		if err := sc.waitForInbound(ctx); err != nil {
			return err
		}
		handler = sc.wrap(handler)
	} else if *labels != "" {
		wl.labels = parseLabels(*labels)
		c, err := inClusterClient(corev1.AddToScheme, securityv1.AddToScheme)
		if err != nil {
			return err
		}
		sc := &sidecar{client: c, w: wl, mesh: *mesh, http: &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
		handler = sc.wrap(handler)
	}
	return run(ctx, &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second, Handler: handler}, false)
}

// parseLabels reads k=v,k=v.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// inClusterClient is a client with the pod's ServiceAccount token.
func inClusterClient(schemes ...func(*runtime.Scheme) error) (client.Client, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	for _, add := range schemes {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// server is one server of a Gateway, as the listeners serve it.
type server struct {
	// gateway is the Gateway's <namespace>/<name>.
	gateway string
	// hosts without their namespace part ("ns/host").
	hosts []string
	// https: the server is served on the TLS listener, with cert.
	https bool
	// redirect: tls.httpsRedirect on a plain server.
	redirect bool
	// credential is the Secret of an HTTPS server, <namespace>/<name>.
	credential string
	cert       *tls.Certificate
	// clientAuth and clientCAs: client certificates (clientcerts.go);
	// clientCAsFrom names where the CAs came from, for the log.
	clientAuth    tls.ClientAuthType
	clientCAs     *x509.CertPool
	clientCAsFrom string
}

// snapshot is what the Gateways said at the last refresh.
type snapshot struct {
	servers []server
	summary string
}

// cachedCert is a credential Secret, parsed, at one resourceVersion.
type cachedCert struct {
	resourceVersion string
	cert            *tls.Certificate
}

// router serves the Gateways: their servers and certificates are refreshed
// in the background; the VirtualServices are read from the API on every
// request (a test gateway needs no cache).
type router struct {
	client   client.Client
	gateways []string
	snap     atomic.Pointer[snapshot]
	// certs is touched by the refresh loop only.
	certs map[string]cachedCert
	// workload is the stand-in's pods, for the EnvoyFilters that reach
	// them; without labels no global rate limit is applied.
	workload workload
	globals  atomic.Pointer[[]globalFilter]
	limiter  *limiter
}

// gatewayList is the repeatable --gateway flag (commas allowed too).
type gatewayList []string

func (l *gatewayList) String() string { return strings.Join(*l, ",") }

func (l *gatewayList) Set(v string) error {
	for _, g := range strings.Split(v, ",") {
		if ns, name, ok := strings.Cut(strings.TrimSpace(g), "/"); !ok || ns == "" || name == "" {
			return fmt.Errorf("gateway %q is not <namespace>/<name>", g)
		}
		*l = append(*l, strings.TrimSpace(g))
	}
	return nil
}

func gateway(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	var gws gatewayList
	fs.Var(&gws, "gateway", "namespace/name of an Istio Gateway to serve (repeatable; default istio-system/public)")
	addr := fs.String("listen", ":8080", "listen address of the plain HTTP listener (the Gateways' HTTP servers)")
	httpsAddr := fs.String("https-addr", ":8443", "listen address of the TLS listener (the Gateways' HTTPS servers)")
	refresh := fs.Duration("refresh", time.Second, "how often the Gateways and their credential Secrets are re-read")
	var w workload
	fs.StringVar(&w.namespace, "workload-namespace", "", "namespace of the stand-in's pods: with --workload-labels, the EnvoyFilters there and in --root-namespace whose workloadSelector matches apply their global rate limits")
	labels := fs.String("workload-labels", "", "labels of the stand-in's pods, k=v,k=v")
	fs.StringVar(&w.root, "root-namespace", "istio-system", "Istio's root namespace")
	xdsAddr := fs.String("xds", "", "istiod's plaintext xDS address host:port: take listeners, routes and endpoints from istiod as the ingress gateway's Envoy (a router node of this pod) instead of reading Gateways and VirtualServices (xdsgateway.go); --listen and --https-addr are then unused: istiod's listeners are bound on their own ports")
	statusAddr := fs.String("status-addr", ":15021", "with --xds: listen address of the status listener (/healthz/ready: 200 once istiod's listeners are all bound), as Istio's gateway's 15021")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *labels != "" {
		w.labels = parseLabels(*labels)
	}
	if len(gws) == 0 {
		gws = gatewayList{"istio-system/public"}
	}
	c, err := inClusterClient(corev1.AddToScheme, networkingv1.AddToScheme, networkingv1alpha3.AddToScheme)
	if err != nil {
		return err
	}
	rt := &router{client: c, gateways: gws, certs: map[string]cachedCert{}, workload: w}
	rt.limiter = &limiter{rt: rt, conns: map[string]*grpc.ClientConn{}}
	rt.globals.Store(&[]globalFilter{})
	rt.snap.Store(&snapshot{})
	if *xdsAddr != "" {
		g, err := newXDSGateway(rt, *xdsAddr, w)
		if err != nil {
			return err
		}
		return runXDSGateway(ctx, g, g.xds.Node.Namespace, *refresh, *statusAddr)
	}
	// A first read before listening: the readiness probe (a TCP connect)
	// then passes only once the Gateways that exist are served.
	rt.refresh(ctx)
	go func() {
		t := time.NewTicker(*refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				rt.refresh(ctx)
			}
		}
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	plain := &http.Server{Addr: *addr, Handler: &listener{rt: rt}, ReadHeaderTimeout: 10 * time.Second}
	secure := &http.Server{Addr: *httpsAddr, Handler: &listener{rt: rt, https: true}, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: rt.certificate, GetConfigForClient: rt.configForClient}}
	errs := make(chan error, 2)
	go func() { errs <- run(ctx, plain, false) }()
	go func() { errs <- run(ctx, secure, true) }()
	first := <-errs
	cancel()
	return errors.Join(first, <-errs)
}

// refresh re-reads the Gateways and the Secrets their HTTPS servers name.
// A Gateway that cannot be read keeps its last servers; one that is gone
// has none. A credential Secret that cannot be read keeps its last
// certificate (Envoy keeps the last secret it was given); one never read
// leaves its server without a certificate, so handshakes for it fail.
func (rt *router) refresh(ctx context.Context) {
	old := rt.snap.Load()
	var servers []server
	for _, ref := range rt.gateways {
		ns, name, _ := strings.Cut(ref, "/")
		gw := &networkingv1.Gateway{}
		if err := rt.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gw); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			log.Printf("refresh: Gateway %s: %v; keeping its last servers", ref, err)
			for _, s := range old.servers {
				if s.gateway == ref {
					servers = append(servers, s)
				}
			}
			continue
		}
		for i, s := range gw.Spec.GetServers() {
			srv := server{gateway: ref}
			for _, h := range s.GetHosts() {
				if _, host, ok := strings.Cut(h, "/"); ok {
					h = host
				}
				srv.hosts = append(srv.hosts, strings.ToLower(h))
			}
			switch protocol := strings.ToUpper(s.GetPort().GetProtocol()); protocol {
			case "HTTP", "HTTP2":
				srv.redirect = s.GetTls().GetHttpsRedirect()
			case "HTTPS":
				auth, ok := clientAuthOf(s.GetTls())
				if !ok || s.GetTls().GetCredentialName() == "" {
					log.Printf("refresh: Gateway %s server %d: only tls.mode SIMPLE, MUTUAL or OPTIONAL_MUTUAL with tls.credentialName is supported", ref, i)
					continue
				}
				srv.https = true
				srv.credential = ns + "/" + s.GetTls().GetCredentialName()
				srv.cert = rt.loadCertificate(ctx, srv.credential)
				if srv.clientAuth = auth; auth != tls.NoClientCert {
					srv.clientCAs, srv.clientCAsFrom = rt.loadClientCAs(ctx, ns, s.GetTls())
				}
			default:
				log.Printf("refresh: Gateway %s server %d: protocol %q is not supported", ref, i, protocol)
				continue
			}
			servers = append(servers, srv)
		}
	}
	if rt.workload.labels != nil {
		if globals, err := loadGlobalFilters(ctx, rt.client, rt.workload); err != nil {
			log.Printf("refresh: %v; keeping the last global rate limits", err)
		} else {
			rt.globals.Store(&globals)
		}
	}
	next := &snapshot{servers: servers, summary: summarize(servers, rt.certs)}
	if next.summary != old.summary {
		log.Printf("serving: %s", next.summary)
	}
	rt.snap.Store(next)
}

// loadCertificate returns the certificate of Secret ns/name, parsed again
// only when its resourceVersion changed.
func (rt *router) loadCertificate(ctx context.Context, ref string) *tls.Certificate {
	ns, name, _ := strings.Cut(ref, "/")
	cached, ok := rt.certs[ref]
	s := &corev1.Secret{}
	if err := rt.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if ok {
			log.Printf("refresh: Secret %s: %v; keeping its certificate of resourceVersion %s", ref, err, cached.resourceVersion)
			return cached.cert
		}
		log.Printf("refresh: Secret %s: %v; its server has no certificate", ref, err)
		return nil
	}
	if ok && cached.resourceVersion == s.ResourceVersion {
		return cached.cert
	}
	certPEM, keyPEM := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(certPEM) == 0 { // Istio also reads generic Secrets with cert and key
		certPEM, keyPEM = s.Data["cert"], s.Data["key"]
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		log.Printf("refresh: Secret %s (resourceVersion %s): %v; its server has no certificate", ref, s.ResourceVersion, err)
		delete(rt.certs, ref)
		return nil
	}
	rt.certs[ref] = cachedCert{resourceVersion: s.ResourceVersion, cert: &pair}
	return &pair
}

func summarize(servers []server, certs map[string]cachedCert) string {
	if len(servers) == 0 {
		return "no Gateway server"
	}
	var parts []string
	for _, s := range servers {
		kind := "http"
		switch {
		case s.https && s.cert == nil:
			kind = "https " + s.credential + " (no certificate)"
		case s.https:
			kind = fmt.Sprintf("https %s@%s", s.credential, certs[s.credential].resourceVersion)
			if leaf, err := x509.ParseCertificate(s.cert.Certificate[0]); err == nil {
				kind += fmt.Sprintf(" (issuer %q, serial %s)", leaf.Issuer.CommonName, leaf.SerialNumber)
			}
		case s.redirect:
			kind = "http redirect to https"
		}
		if s.https && s.clientAuth != tls.NoClientCert {
			kind += fmt.Sprintf(" client certificates %s from %s", s.clientAuth, s.clientCAsFrom)
		}
		parts = append(parts, fmt.Sprintf("%s %v %s", s.gateway, s.hosts, kind))
	}
	return strings.Join(parts, "; ")
}

// hostScore tells how specifically pattern covers host, as Istio matches
// hosts: -1 not at all, 0 for "*", the suffix's length for a wildcard
// ("*.example.com" covers every name ending in .example.com, any number of
// labels), more than any wildcard for the exact name.
func hostScore(pattern, host string) int {
	pattern, host = strings.ToLower(pattern), strings.ToLower(host)
	switch {
	case pattern == host:
		return 1<<16 + len(pattern)
	case pattern == "*":
		return 0
	case strings.HasPrefix(pattern, "*") && len(host) > len(pattern)-1 && strings.HasSuffix(host, pattern[1:]):
		return len(pattern) - 1
	}
	return -1
}

// bestScore is how specifically any of patterns covers host.
func bestScore(patterns []string, host string) int {
	best := -1
	for _, p := range patterns {
		best = max(best, hostScore(p, host))
	}
	return best
}

// certificate picks the certificate of the HTTPS server whose hosts cover
// the SNI most specifically (the first HTTPS server without SNI).
func (rt *router) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	s, err := rt.pick(hello)
	if err != nil {
		return nil, err
	}
	return s.cert, nil
}

// pick returns the HTTPS server whose hosts cover the SNI most specifically
// (the first HTTPS server without SNI), if it has a certificate.
func (rt *router) pick(hello *tls.ClientHelloInfo) (*server, error) {
	var best *server
	score := -1
	servers := rt.snap.Load().servers
	for i, s := range servers {
		if !s.https {
			continue
		}
		sc := 0
		if hello.ServerName != "" {
			sc = bestScore(s.hosts, hello.ServerName)
		}
		if sc > score {
			best, score = &servers[i], sc
		}
	}
	switch {
	case best == nil:
		return nil, fmt.Errorf("no HTTPS server for SNI %q", hello.ServerName)
	case best.cert == nil:
		return nil, fmt.Errorf("the HTTPS server of %s for SNI %q has no certificate (Secret %s)", best.gateway, hello.ServerName, best.credential)
	}
	return best, nil
}

// listener serves one listener: the Gateways' plain HTTP servers, or their
// HTTPS servers.
type listener struct {
	rt    *router
	https bool
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	scheme := "http"
	if l.https {
		scheme = "https"
	}
	prefix := fmt.Sprintf("%s %s://%s%s", r.Method, scheme, r.Host, r.URL.Path)
	var srv *server
	score := -1
	servers := l.rt.snap.Load().servers
	for i, s := range servers {
		if s.https != l.https {
			continue
		}
		if sc := bestScore(s.hosts, host); sc > score {
			srv, score = &servers[i], sc
		}
	}
	if srv == nil {
		log.Printf("%s: no %s server for the host", prefix, scheme)
		http.Error(w, "no server for host "+host, http.StatusNotFound)
		return
	}
	if srv.redirect {
		location := "https://" + host + r.URL.RequestURI()
		log.Printf("%s: %s redirects to %s", prefix, srv.gateway, location)
		http.Redirect(w, r, location, http.StatusMovedPermanently)
		return
	}
	a, err := l.rt.resolve(r, srv.gateway, host)
	if err == nil && a != nil {
		if code, why := l.rt.limiter.check(r, *l.rt.globals.Load(), a.route); code != 0 {
			log.Printf("%s: route %s: %d: %s", prefix, a.route, code, why)
			if code == http.StatusTooManyRequests {
				w.Header().Set("X-Envoy-Ratelimited", "true")
			}
			http.Error(w, why, code)
			return
		}
	}
	switch {
	case err != nil:
		log.Printf("%s: %v", prefix, err)
		http.Error(w, err.Error(), http.StatusBadGateway)
	case a == nil:
		log.Printf("%s: no route on %s", prefix, srv.gateway)
		http.Error(w, "no route", http.StatusNotFound)
	case a.direct != nil:
		log.Printf("%s: route %s answers %d", prefix, a.route, a.direct.GetStatus())
		w.Header().Set("X-Route", a.route)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(int(a.direct.GetStatus()))
		body := a.direct.GetBody()
		if b := body.GetBytes(); b != nil {
			_, _ = w.Write(b)
		} else {
			_, _ = io.WriteString(w, body.GetString_())
		}
	default:
		log.Printf("%s: route %s -> %s", prefix, a.route, a.target)
		w.Header().Set("X-Route", a.route)
		r.Header.Set("X-Forwarded-Proto", scheme)
		proxy := httputil.NewSingleHostReverseProxy(a.target)
		proxy.ModifyResponse = func(resp *http.Response) error {
			respond(a.response, resp.Header)
			return nil
		}
		proxy.ServeHTTP(w, r)
	}
}

// respond applies a route's response header changes, as Envoy does before
// it answers: removals, then set (replacing), then add (appending).
func respond(ops *networkingapi.Headers_HeaderOperations, h http.Header) {
	for _, name := range ops.GetRemove() {
		h.Del(name)
	}
	for name, value := range ops.GetSet() {
		h.Set(name, value)
	}
	for name, value := range ops.GetAdd() {
		h.Add(name, value)
	}
}

// action is what a matching route does: answer directly or proxy.
type action struct {
	route  string
	direct *networkingapi.HTTPDirectResponse
	target *url.URL
	// response are the route's response header changes.
	response *networkingapi.Headers_HeaderOperations
}

// resolve returns what the first matching route of the VirtualService
// bound to gateway whose hosts cover host most specifically does; nil when
// no route matches.
func (rt *router) resolve(r *http.Request, gateway, host string) (*action, error) {
	var list networkingv1.VirtualServiceList
	if err := rt.client.List(r.Context(), &list); err != nil {
		return nil, fmt.Errorf("list VirtualServices: %w", err)
	}
	type candidate struct {
		vs    *networkingv1.VirtualService
		score int
	}
	var candidates []candidate
	for _, vs := range list.Items {
		if !slices.ContainsFunc(vs.Spec.Gateways, func(g string) bool { return qualify(g, vs.Namespace) == gateway }) {
			continue
		}
		if sc := bestScore(vs.Spec.Hosts, host); sc >= 0 {
			candidates = append(candidates, candidate{vs, sc})
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool { return candidates[i].score > candidates[j].score })
	for _, c := range candidates {
		for _, route := range c.vs.Spec.Http {
			if !slices.ContainsFunc(route.Match, func(m *networkingapi.HTTPMatchRequest) bool { return matches(m, r) }) {
				continue
			}
			if route.DirectResponse != nil {
				return &action{route: route.Name, direct: route.DirectResponse}, nil
			}
			if len(route.Route) == 0 {
				continue
			}
			modify(route, r)
			dest := pick(route.Route).Destination
			addr, err := rt.serviceAddress(r.Context(), dest.Host, c.vs.Namespace)
			if err != nil {
				return nil, err
			}
			port := uint32(80)
			if dest.Port != nil {
				port = dest.Port.Number
			}
			return &action{route: route.Name, target: &url.URL{Scheme: "http", Host: net.JoinHostPort(addr, strconv.Itoa(int(port)))},
				response: route.GetHeaders().GetResponse()}, nil
		}
	}
	return nil, nil
}

func qualify(gateway, namespace string) string {
	if strings.Contains(gateway, "/") {
		return gateway
	}
	return namespace + "/" + gateway
}

// matches is Envoy's reading of one match: the path, the method, every
// header (names are lower case) and every query parameter.
func matches(m *networkingapi.HTTPMatchRequest, r *http.Request) bool {
	if !stringMatches(m.Uri, r.URL.Path) || !stringMatches(m.Method, r.Method) {
		return false
	}
	for name, want := range m.Headers {
		values, ok := r.Header[http.CanonicalHeaderKey(name)]
		if !ok || !stringMatches(want, strings.Join(values, ",")) {
			return false
		}
	}
	query := r.URL.Query()
	for name, want := range m.QueryParams {
		if !query.Has(name) || !stringMatches(want, query.Get(name)) {
			return false
		}
	}
	return true
}

// pick chooses a destination by weight, as Envoy's weighted clusters do;
// without weights, the first.
func pick(route []*networkingapi.HTTPRouteDestination) *networkingapi.HTTPRouteDestination {
	total := int32(0)
	for _, d := range route {
		total += d.Weight
	}
	if total <= 0 {
		return route[0]
	}
	n := rand.Int32N(total)
	for _, d := range route {
		if n < d.Weight {
			return d
		}
		n -= d.Weight
	}
	return route[len(route)-1]
}

// modify applies a route's request changes, as Envoy does before it
// forwards: the headers it removes, then those it sets (the one command
// operator Portico writes, %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%, as the
// connection's address: the stand-in trusts no proxy), and the path it
// rewrites.
func modify(route *networkingapi.HTTPRoute, r *http.Request) {
	defer func() {
		ops := route.GetHeaders().GetRequest()
		for _, name := range ops.GetRemove() {
			r.Header.Del(name)
		}
		for name, value := range ops.GetSet() {
			if value == "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%" {
				value, _, _ = net.SplitHostPort(r.RemoteAddr)
			}
			r.Header.Set(name, value)
		}
	}()
	rw := route.Rewrite
	switch {
	case rw == nil:
	case rw.UriRegexRewrite != nil:
		if re, err := regexp.Compile(rw.UriRegexRewrite.Match); err == nil {
			r.URL.Path = re.ReplaceAllString(r.URL.Path, rw.UriRegexRewrite.Rewrite)
		}
	case rw.Uri != "":
		// Envoy replaces what the route matched: the prefix of a prefix
		// match, the whole path of an exact one.
		for _, m := range route.Match {
			if !matches(m, r) {
				continue
			}
			if p, ok := m.GetUri().GetMatchType().(*networkingapi.StringMatch_Prefix); ok {
				r.URL.Path = rw.Uri + strings.TrimPrefix(r.URL.Path, p.Prefix)
			} else {
				r.URL.Path = rw.Uri
			}
			break
		}
	}
	r.URL.RawPath = ""
}

func stringMatches(m *networkingapi.StringMatch, s string) bool {
	if m == nil {
		return true
	}
	switch t := m.MatchType.(type) {
	case *networkingapi.StringMatch_Exact:
		return s == t.Exact
	case *networkingapi.StringMatch_Prefix:
		return strings.HasPrefix(s, t.Prefix)
	case *networkingapi.StringMatch_Regex:
		re, err := regexp.Compile("^(?:" + t.Regex + ")$")
		return err == nil && re.MatchString(s)
	}
	return false
}

// serviceAddress resolves <svc>.<ns>.svc.<domain> (or a short name) to the
// Service's cluster IP through the API: the node has no cluster DNS.
func (rt *router) serviceAddress(ctx context.Context, host, namespace string) (string, error) {
	parts := strings.Split(host, ".")
	name := parts[0]
	if len(parts) > 1 {
		namespace = parts[1]
	}
	svc := &corev1.Service{}
	if err := rt.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
		return "", fmt.Errorf("destination %s: %w", host, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("destination %s has no cluster IP", host)
	}
	return svc.Spec.ClusterIP, nil
}

// headerExpectations is the repeatable --expect-header Name=Value flag.
type headerExpectations [][2]string

func (h *headerExpectations) String() string { return fmt.Sprint(*h) }

func (h *headerExpectations) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("--expect-header %q is not Name=Value", v)
	}
	*h = append(*h, [2]string{http.CanonicalHeaderKey(name), value})
	return nil
}

// expectation is the answer get waits for, or with errorKind the kind of
// failure (errorKind's names).
type expectation struct {
	status    int
	body      string
	headers   headerExpectations
	errorKind string
}

// check returns "" when the answer is the expected one, else the kind of
// mismatch.
func (e expectation) check(status int, body string, header http.Header) string {
	if status != e.status {
		return fmt.Sprintf("status %d", status)
	}
	if !strings.Contains(body, e.body) {
		return "body"
	}
	for _, h := range e.headers {
		if header.Get(h[0]) != h[1] {
			return "header " + h[0]
		}
	}
	return ""
}

func get(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	host := fs.String("host", "", "Host header (default the URL's host)")
	method := fs.String("method", http.MethodGet, "request method")
	var want expectation
	fs.IntVar(&want.status, "expect-status", http.StatusOK, "status to wait for")
	fs.StringVar(&want.body, "expect-body", "", "substring of the body to wait for")
	fs.Var(&want.headers, "expect-header", "Name=Value: a header the answer must carry with exactly this value (repeatable)")
	var send headerExpectations
	fs.Var(&send, "header", "Name=Value: a header to send with the request (repeatable)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to retry (with --loop: how long to keep sending)")
	interval := fs.Duration("interval", 500*time.Millisecond, "pause between requests")
	caFile := fs.String("ca", "", "PEM bundle of the CA certificates to trust for https URLs, and only them (default the system's)")
	connect := fs.String("connect", "", "host:port to dial instead of the URL's host, which stays the TLS server name (SNI) and the Host header; for every request, redirects included")
	noFollow := fs.Bool("no-follow", false, "do not follow redirects: the redirect is the answer")
	certFile := fs.String("cert", "", "PEM client certificate (chain, leaf first) to present to https servers that ask for one; needs --key")
	keyFile := fs.String("key", "", "PEM private key of --cert")
	fs.StringVar(&want.errorKind, "expect-error", "", "wait for the request to fail with this kind of error (tls, unknown-authority, certificate, connect, timeout, other) instead of an answer")
	loop := fs.Bool("loop", false, "keep sending the request until stopped or --timeout, counting expected answers and failures by kind; prints a tally line, 'traffic {json}', every second")
	// The URL may come before or after the flags.
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return errors.New("get needs one URL")
	}
	target := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New("get needs one URL")
	}
	c, err := httpClient(*caFile, *connect, *noFollow)
	if err != nil {
		return err
	}
	if err := presentCertificate(c, *certFile, *keyFile); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if *loop {
		return traffic(ctx, c, *method, target, *host, send, want, *interval)
	}
	var last string
	for {
		got, text, header, err := request(ctx, c, *method, target, *host, send)
		if want.errorKind != "" {
			if err != nil && errorKind(err) == want.errorKind && ctx.Err() == nil {
				fmt.Printf("error %s: %v\n", want.errorKind, err)
				return nil
			}
			if err != nil {
				last = fmt.Sprintf("error %s: %v", errorKind(err), err)
			} else {
				last = fmt.Sprintf("%d %s", got, text)
			}
		} else if err == nil {
			last = fmt.Sprintf("%d %s", got, text)
			for _, h := range want.headers {
				last += fmt.Sprintf("\n%s: %s", h[0], header.Get(h[0]))
			}
			if want.check(got, text, header) == "" {
				fmt.Println(last)
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s (Host %s, connect %s): want %d %q %v, last answer: %s", *method, target, *host, *connect, want.status, want.body, want.headers, last)
		case <-time.After(*interval):
		}
	}
}

// httpClient opens a new connection, with a new TLS handshake, for every
// request, so each request sees the certificate the server has now.
func httpClient(caFile, connect string, noFollow bool) (*http.Client, error) {
	transport := &http.Transport{
		DisableKeepAlives:     true,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 5 * time.Second,
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if connect != "" {
			addr = connect
		}
		return dialer.DialContext(ctx, network, addr)
	}
	c := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	if noFollow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c, nil
}

func request(ctx context.Context, c *http.Client, method, target, host string, send headerExpectations) (int, string, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return 0, "", nil, err
	}
	for _, h := range send {
		req.Header.Add(h[0], h[1])
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(text)), resp.Header, err
}

// tally counts the answers of a --loop: ok are the expected ones; errors
// counts the others by kind (errorKind, or the mismatch), last has the
// last message of each kind.
type tally struct {
	OK     int               `json:"ok"`
	Failed int               `json:"failed"`
	Errors map[string]int    `json:"errors"`
	Last   map[string]string `json:"last"`
}

// traffic sends the request every interval until ctx ends and prints the
// tally every second and at the end; the first failures of each kind are
// printed as they happen.
func traffic(ctx context.Context, c *http.Client, method, target, host string, send headerExpectations, want expectation, interval time.Duration) error {
	t := tally{Errors: map[string]int{}, Last: map[string]string{}}
	report := func() {
		line, _ := json.Marshal(t)
		fmt.Printf("traffic %s\n", line)
	}
	printed := time.Now()
	for {
		got, text, header, err := request(ctx, c, method, target, host, send)
		if ctx.Err() != nil {
			report()
			return nil
		}
		kind, msg := "", ""
		if err != nil {
			kind, msg = errorKind(err), err.Error()
		} else if kind = want.check(got, text, header); kind != "" {
			msg = fmt.Sprintf("%d %s", got, text)
		}
		if kind == "" {
			t.OK++
		} else {
			t.Failed++
			t.Errors[kind]++
			t.Last[kind] = msg
			if t.Errors[kind] <= 3 {
				fmt.Printf("failure %s: %s\n", kind, msg)
			}
		}
		if time.Since(printed) >= time.Second {
			report()
			printed = time.Now()
		}
		select {
		case <-ctx.Done():
			report()
			return nil
		case <-time.After(interval):
		}
	}
}

// errorKind names the kind of a failed request: unknown-authority (the
// server's certificate is not signed by a trusted CA), certificate (another
// verification failure: name, validity), tls (the handshake failed
// otherwise, e.g. the server had no certificate), connect, timeout, other.
func errorKind(err error) string {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError
	var record tls.RecordHeaderError
	var op *net.OpError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &unknown):
		return "unknown-authority"
	case errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return "certificate"
	case errors.As(err, &alert), errors.As(err, &record), strings.Contains(err.Error(), "tls:"):
		return "tls"
	case errors.As(err, &op) && op.Op == "dial":
		return "connect"
	case errors.As(err, &timeout) && timeout.Timeout():
		return "timeout"
	}
	return "other"
}
