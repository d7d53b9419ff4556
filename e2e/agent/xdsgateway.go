package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/e2e/envoy"
	"github.com/portico-dev/portico/e2e/xds"
)

// The gateway stand-in programmed by istiod (gateway --xds ADDR): it asks
// istiod for its configuration as the ingress gateway's Envoy would (a
// router node of its pod, e2e/xds) and serves it:
//
//   - every listener istiod sends is bound on its port, one it no longer
//     sends closed (xdslisteners.go); a connection is TLS or plain text by
//     its first byte, and a TLS handshake gets the filter chain its SNI
//     picks as Envoy does (exact server name, then the longest wildcard,
//     then a chain without server names);
//   - the chain's HTTP connection manager names its route configuration
//     (RDS, or inline); the virtual host, route, rewrites, weighted
//     cluster, header mutations, direct responses and redirects are
//     e2e/envoy's reading of it; require_tls on a plain-text connection
//     redirects to https;
//   - a forwarded request goes to an endpoint of the route's cluster from
//     EDS (or the cluster's own load assignment), chosen at random;
//   - imitated, not Envoy: the TLS certificate and client CAs — istiod
//     sends SDS references (kubernetes://NAME, NAME-cacert,
//     configmap://NS/NAME), and the stand-in reads those Secrets and
//     ConfigMaps through the API as istiod's SDS would serve them
//     (readSecret), every --refresh: istiod sends secrets only over an
//     authenticated xDS connection, and the stand-ins' is plaintext;
//   - global rate limits: the connection manager's rate limit filters and
//     the routes' rate limits istiod made of Portico's EnvoyFilters
//     (xdsratelimit.go); the EnvoyFilters themselves are not read.

// xdsGateway serves what istiod sent.
type xdsGateway struct {
	xds *xds.Client
	rt  *router
	// listeners are istiod's listeners, bound.
	listeners listenerSet
	// secrets are the SDS secrets the listeners name, by SDS name.
	secrets atomic.Pointer[map[string]sdsSecret]
	// active are the listeners serving, by port (refreshSecrets), and
	// warming the ones istiod sent that wait for their secrets.
	active    atomic.Pointer[map[uint32]*listenerv3.Listener]
	warming   map[uint32]warmingListener
	refreshMu sync.Mutex
}

// warmingListener is a listener of istiod's waiting for its secrets.
type warmingListener struct {
	l     *listenerv3.Listener
	since time.Time
}

// sdsSecret is a certificate or a CA bundle read from a Secret.
type sdsSecret struct {
	cert *tls.Certificate
	cas  *x509.CertPool
	from string
}

// portOf is the port of a listen address ":8080".
func portOf(addr string) (uint32, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 32)
	return uint32(n), err
}

// xdsNode is the router node of the stand-in's pod, from the downward
// API's environment (POD_IP, POD_NAME, POD_NAMESPACE, SERVICE_ACCOUNT).
func xdsNode(kind string, w workload) xds.Node {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = w.namespace
	}
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	workloadName := name
	if i := strings.LastIndex(name, "-"); i > 0 {
		if j := strings.LastIndex(name[:i], "-"); j > 0 {
			workloadName = name[:j] // <deployment>-<replicaset hash>-<pod hash>
		}
	}
	return xds.Node{Type: kind, IP: os.Getenv("POD_IP"), PodName: name, Namespace: ns, Labels: w.labels,
		ServiceAccount: os.Getenv("SERVICE_ACCOUNT"), WorkloadName: workloadName}
}

// init makes g's maps.
func (g *xdsGateway) init() {
	g.secrets.Store(&map[string]sdsSecret{})
	g.active.Store(&map[uint32]*listenerv3.Listener{})
	g.warming = map[uint32]warmingListener{}
	g.listeners.notReady = "istiod has sent no listener yet"
}

// newXDSGateway is the stand-in's xDS mode: a router node of its pod.
func newXDSGateway(rt *router, addr string, w workload) (*xdsGateway, error) {
	node := xdsNode(xds.Router, w)
	if node.IP == "" || node.Namespace == "" {
		return nil, fmt.Errorf("--xds needs the pod's POD_IP and POD_NAMESPACE (or --workload-namespace) in the environment")
	}
	g := &xdsGateway{xds: &xds.Client{Addr: addr, Node: node}, rt: rt}
	g.init()
	rt.limiter.resolve = g.resolveFromXDS
	log.Printf("xds: %s as %s", addr, node.ID())
	return g, nil
}

// listenerSDSNames are the SDS names of a listener's TLS chains, each with
// its initial fetch timeout (Envoy's default 15 s when unset; Istio
// leaves it unset for credentialName secrets).
func listenerSDSNames(l *listenerv3.Listener) map[string]time.Duration {
	out := map[string]time.Duration{}
	add := func(c *tlsv3.SdsSecretConfig) {
		if c == nil {
			return
		}
		t := 15 * time.Second
		if ft := c.GetSdsConfig().GetInitialFetchTimeout(); ft != nil {
			t = ft.AsDuration()
		}
		out[c.GetName()] = max(out[c.GetName()], t)
	}
	for _, fc := range append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain()) {
		tc := envoy.DownstreamTLS(fc)
		if tc == nil {
			continue
		}
		for _, c := range tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
			add(c)
		}
		add(tc.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig())
		add(tc.GetCommonTlsContext().GetValidationContextSdsSecretConfig())
	}
	return out
}

// refreshSecrets reads the SDS secrets of istiod's listeners and of the
// ones serving, then activates istiod's listeners as Envoy warms them: a
// new or changed listener replaces the one serving its port once every
// secret it names is loaded, or once its initial fetch timeout has
// passed (then its handshakes fail where a secret is missing); until
// then the previous listener goes on serving.
func (g *xdsGateway) refreshSecrets(ctx context.Context, namespace string) {
	g.refreshMu.Lock()
	defer g.refreshMu.Unlock()
	snap := g.xds.Current()
	active := *g.active.Load()
	wanted := map[string]bool{}
	for _, l := range slices.Concat(slices.Collect(maps.Values(snap.Listeners)), slices.Collect(maps.Values(active))) {
		for n := range listenerSDSNames(l) {
			wanted[n] = true
		}
	}
	next := map[string]sdsSecret{}
	old := *g.secrets.Load()
	for _, name := range slices.Sorted(maps.Keys(wanted)) {
		s, err := g.readSecret(ctx, namespace, name)
		if err != nil {
			if prev, ok := old[name]; ok {
				log.Printf("sds %s: %v; keeping %s", name, err, prev.from)
				next[name] = prev
			} else {
				log.Printf("sds %s: %v", name, err)
			}
			continue
		}
		next[name] = s
	}
	g.secrets.Store(&next)

	nextActive := map[uint32]*listenerv3.Listener{}
	for _, l := range snap.Listeners {
		port := l.GetAddress().GetSocketAddress().GetPortValue()
		// The listener waits for its missing secrets, each up to its
		// initial fetch timeout.
		var missing []string
		timeout := time.Duration(0)
		for n, t := range listenerSDSNames(l) {
			if _, ok := next[n]; !ok {
				missing, timeout = append(missing, n), max(timeout, t)
			}
		}
		slices.Sort(missing)
		prev, serving := active[port]
		if len(missing) == 0 || !serving || proto.Equal(prev, l) {
			nextActive[port] = l
			delete(g.warming, port)
			continue
		}
		since, ok := g.warming[port]
		if !ok || since.l != l {
			since = warmingListener{l: l, since: time.Now()}
			g.warming[port] = since
		}
		if time.Since(since.since) >= timeout {
			log.Printf("xds: listener %s activated without %v after its initial fetch timeout %s", l.GetName(), missing, timeout)
			nextActive[port] = l
			delete(g.warming, port)
			continue
		}
		log.Printf("xds: listener %s warming (waiting for %v); the previous one serves port %d", l.GetName(), missing, port)
		nextActive[port] = prev
	}
	g.active.Store(&nextActive)
}

// activeListener is the listener serving port.
func (g *xdsGateway) activeListener(port uint32) *listenerv3.Listener {
	return (*g.active.Load())[port]
}

// sdsRef is the object an SDS name refers to, as istiod's SDS reads it
// (pilot/pkg/model/credentials ParseResourceName, pilot/pkg/xds SecretGen):
// kubernetes://[NS/]NAME is Secret NAME of NS (default: the proxy's
// namespace; istiod serves a kubernetes:// secret of another namespace to
// no gateway), kubernetes-gateway://NS/NAME a Secret of NS (the Gateway
// API's form), configmap://NS/NAME ConfigMap NAME of NS (its CAs only). A
// name ending in -cacert asks for CAs only.
type sdsRef struct {
	configMap       bool
	namespace, name string
	caOnly          bool
}

func parseSDSName(sdsName, proxyNamespace string) (sdsRef, error) {
	kind, rest, ok := strings.Cut(sdsName, "://")
	if !ok || rest == "" {
		return sdsRef{}, fmt.Errorf("SDS name %q is not TYPE://NAME", sdsName)
	}
	ns, name, qualified := strings.Cut(rest, "/")
	if !qualified {
		ns, name = proxyNamespace, rest
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return sdsRef{}, fmt.Errorf("SDS name %q: want TYPE://NAMESPACE/NAME", sdsName)
	}
	ref := sdsRef{namespace: ns, name: name, caOnly: strings.HasSuffix(name, "-cacert")}
	switch kind {
	case "kubernetes":
		if ns != proxyNamespace {
			return sdsRef{}, fmt.Errorf("SDS name %q: istiod serves a kubernetes:// secret of another namespace than the proxy's (%s) to no gateway", sdsName, proxyNamespace)
		}
	case "kubernetes-gateway":
		if !qualified {
			return sdsRef{}, fmt.Errorf("SDS name %q: kubernetes-gateway:// needs NAMESPACE/NAME", sdsName)
		}
	case "configmap":
		if !qualified {
			return sdsRef{}, fmt.Errorf("SDS name %q: configmap:// needs NAMESPACE/NAME", sdsName)
		}
		ref.configMap, ref.caOnly, ref.name = true, true, strings.TrimSuffix(name, "-cacert")
	default:
		return sdsRef{}, fmt.Errorf("SDS name %q: type %s is not one istiod serves from the cluster", sdsName, kind)
	}
	return ref, nil
}

// extractRoot is the CA bundle of a Secret's or ConfigMap's data as istiod
// reads it: key cacert, else ca.crt; a present but empty key, or neither,
// is an error.
func extractRoot(data map[string][]byte) ([]byte, error) {
	for _, k := range []string{"cacert", "ca.crt"} {
		if len(data[k]) > 0 {
			return data[k], nil
		}
	}
	for _, k := range []string{"cacert", "ca.crt"} {
		if _, ok := data[k]; ok {
			return nil, fmt.Errorf("found key %q, but it was empty", k)
		}
	}
	return nil, fmt.Errorf("no key cacert or ca.crt")
}

// extractCert is a Secret's certificate and key as istiod reads them:
// cert and key, else tls.crt and tls.key.
func extractCert(data map[string][]byte) (certPEM, keyPEM []byte, err error) {
	for _, k := range [][2]string{{"cert", "key"}, {corev1.TLSCertKey, corev1.TLSPrivateKeyKey}} {
		if len(data[k[0]]) > 0 && len(data[k[1]]) > 0 {
			return data[k[0]], data[k[1]], nil
		}
	}
	return nil, nil, fmt.Errorf("no keys cert and key or tls.crt and tls.key")
}

// readSecret reads SDS secret sdsName as istiod serves it to a gateway of
// namespace (imitated: istiod sends gateways their credentials only over
// an authenticated connection). CAs only (-cacert, configmap://): the
// bundle of Secret NAME-cacert if it exists, else of Secret NAME (the name
// without -cacert), or of the ConfigMap; otherwise the certificate and key
// of Secret NAME.
func (g *xdsGateway) readSecret(ctx context.Context, namespace, sdsName string) (sdsSecret, error) {
	ref, err := parseSDSName(sdsName, namespace)
	if err != nil {
		return sdsSecret{}, err
	}
	key := client.ObjectKey{Namespace: ref.namespace, Name: ref.name}
	var data map[string][]byte
	var from string
	switch {
	case ref.configMap:
		cm := &corev1.ConfigMap{}
		if err := g.rt.client.Get(ctx, key, cm); err != nil {
			return sdsSecret{}, err
		}
		data, from = map[string][]byte{}, fmt.Sprintf("ConfigMap %s@%s", key, cm.ResourceVersion)
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
	default:
		s := &corev1.Secret{}
		err := g.rt.client.Get(ctx, key, s)
		if apierrors.IsNotFound(err) && ref.caOnly {
			key.Name = strings.TrimSuffix(ref.name, "-cacert")
			err = g.rt.client.Get(ctx, key, s)
		}
		if err != nil {
			return sdsSecret{}, err
		}
		data, from = s.Data, fmt.Sprintf("Secret %s@%s", key, s.ResourceVersion)
	}
	if ref.caOnly {
		bundle, err := extractRoot(data)
		if err != nil {
			return sdsSecret{}, fmt.Errorf("%s: %w", from, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			return sdsSecret{}, fmt.Errorf("%s: no PEM certificate in its CA bundle", from)
		}
		return sdsSecret{cas: pool, from: from}, nil
	}
	certPEM, keyPEM, err := extractCert(data)
	if err != nil {
		return sdsSecret{}, fmt.Errorf("%s: %w", from, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return sdsSecret{}, fmt.Errorf("%s: %w", from, err)
	}
	return sdsSecret{cert: &pair, from: from}, nil
}

// configForClient is the TLS configuration of the chain of the listener
// on port the SNI picks: its certificate and, with a validation context,
// its client CAs (required when require_client_certificate).
func (g *xdsGateway) configForClient(port uint32, hello *tls.ClientHelloInfo) (*tls.Config, error) {
	l := g.activeListener(port)
	if l == nil {
		return nil, fmt.Errorf("no listener of istiod's serves port %d", port)
	}
	fc := envoy.ChainForSNI(l, hello.ServerName)
	tc := envoy.DownstreamTLS(fc)
	if tc == nil {
		return nil, fmt.Errorf("the chain for SNI %q is not TLS", hello.ServerName)
	}
	secrets := *g.secrets.Load()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	for _, s := range tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
		if sec, ok := secrets[s.GetName()]; ok && sec.cert != nil {
			cfg.Certificates = append(cfg.Certificates, *sec.cert)
		}
	}
	if len(cfg.Certificates) == 0 {
		return nil, fmt.Errorf("the chain for SNI %q has no certificate yet", hello.ServerName)
	}
	ca := tc.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
	if ca == nil {
		ca = tc.GetCommonTlsContext().GetValidationContextSdsSecretConfig()
	}
	if ca != nil {
		sec, ok := secrets[ca.GetName()]
		if !ok || sec.cas == nil {
			return nil, fmt.Errorf("the chain for SNI %q has no client CAs (%s)", hello.ServerName, ca.GetName())
		}
		cfg.ClientCAs, cfg.ClientAuth = sec.cas, tls.VerifyClientCertIfGiven
		if tc.GetRequireClientCertificate().GetValue() {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return cfg, nil
}

// xdsListener serves istiod's listener on port.
type xdsListener struct {
	g    *xdsGateway
	port uint32
}

func (l *xdsListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme, sni, https := "http", "", r.TLS != nil
	if https {
		scheme, sni = "https", r.TLS.ServerName
	}
	prefix := fmt.Sprintf("%s %s://%s%s (port %d)", r.Method, scheme, r.Host, r.URL.Path, l.port)
	snap := l.g.xds.Current()
	lis := l.g.activeListener(l.port)
	if !https && lis != nil && !hasPlainChain(lis) {
		// No plain-text chain: Envoy closes the connection.
		log.Printf("%s: listener %s has no plain-text chain; closing", prefix, lis.GetName())
		closeConnection(w)
		return
	}
	rc, hcm, err := routeConfigFor(snap, lis, l.port, sni)
	if err != nil {
		log.Printf("%s: %v", prefix, err)
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	req := envoy.FromHTTP(r)
	if hcm.GetStripAnyHostPort() {
		if h, _, err := net.SplitHostPort(req.Host); err == nil {
			req.Host = h
		}
	}
	vh := envoy.VirtualHost(rc, req.Host)
	if vh != nil && !https && vh.GetRequireTls() != routev3.VirtualHost_NONE {
		// Envoy answers before it looks at the routes.
		location := "https://" + strings.Split(req.Host, ":")[0] + r.URL.RequestURI()
		log.Printf("%s: %s requires TLS: %s", prefix, vh.GetName(), location)
		http.Redirect(w, r, location, http.StatusMovedPermanently)
		return
	}
	var rt *routev3.Route
	if vh != nil {
		if rt, err = envoy.Route(vh, req); err != nil {
			log.Printf("%s: %s: %v", prefix, rc.GetName(), err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if rt == nil {
		log.Printf("%s: no route in %s (virtual host %q)", prefix, rc.GetName(), vh.GetName())
		w.WriteHeader(http.StatusNotFound)
		return
	}
	l.g.route(w, r, prefix, scheme, snap, hcm, rc, vh, rt)
}

// routeConfigFor is the route configuration the HTTP connection manager
// of the listener on port serves for the SNI.
func routeConfigFor(snap *xds.Snapshot, l *listenerv3.Listener, port uint32, sni string) (*routev3.RouteConfiguration, *hcmv3.HttpConnectionManager, error) {
	if l == nil {
		return nil, nil, fmt.Errorf("no listener of istiod's serves port %d", port)
	}
	fc := envoy.ChainForSNI(l, sni)
	hcm := xds.ChainHCM(fc)
	if hcm == nil {
		return nil, nil, fmt.Errorf("listener %s has no HTTP chain for SNI %q", l.GetName(), sni)
	}
	if rc := hcm.GetRouteConfig(); rc != nil {
		return rc, hcm, nil
	}
	name := hcm.GetRds().GetRouteConfigName()
	rc := snap.Routes[name]
	if rc == nil {
		return nil, nil, fmt.Errorf("listener %s: route configuration %q not received", l.GetName(), name)
	}
	return rc, hcm, nil
}

// route does what the route says: a direct response, a redirect, or a
// forward to an endpoint of its cluster with its rewrites and header
// mutations.
func (g *xdsGateway) route(w http.ResponseWriter, r *http.Request, prefix, scheme string, snap *xds.Snapshot,
	hcm *hcmv3.HttpConnectionManager, rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, rt *routev3.Route) {
	code, why, err := g.xdsRateLimit(r, hcm, rt)
	if err != nil {
		log.Printf("%s: route %s: %v", prefix, rt.GetName(), err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if code != 0 {
		log.Printf("%s: route %s: %d: %s", prefix, rt.GetName(), code, why)
		if code == http.StatusTooManyRequests {
			w.Header().Set("X-Envoy-Ratelimited", "true")
		}
		http.Error(w, why, code)
		return
	}
	vars := map[string]string{"%DOWNSTREAM_REMOTE_ADDRESS%": r.RemoteAddr, "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%": remoteIP(r)}
	fail := func(err error) {
		log.Printf("%s: route %s: %v", prefix, rt.GetName(), err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
	switch {
	case rt.GetDirectResponse() != nil:
		if err := envoy.Apply(w.Header(), envoy.ResponseMutations(rc, vh, rt, nil), vars); err != nil {
			fail(err)
			return
		}
		d := rt.GetDirectResponse()
		log.Printf("%s: route %s answers %d", prefix, rt.GetName(), d.GetStatus())
		w.WriteHeader(int(d.GetStatus()))
		if b := d.GetBody().GetInlineBytes(); b != nil {
			_, _ = w.Write(b)
		} else {
			_, _ = io.WriteString(w, d.GetBody().GetInlineString())
		}
	case rt.GetRedirect() != nil:
		status, location, err := envoy.Redirect(rt, scheme, envoy.FromHTTP(r))
		if err != nil {
			fail(err)
			return
		}
		log.Printf("%s: route %s redirects %d to %s", prefix, rt.GetName(), status, location)
		http.Redirect(w, r, location, status)
	default:
		if err := g.forward(w, r, prefix, scheme, snap, vars, rc, vh, rt); err != nil {
			fail(err)
		}
	}
}

func remoteIP(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// forward proxies the request to an endpoint of the cluster the route
// picks, after its rewrites and request header mutations; the response
// gets the route's response header mutations.
func (g *xdsGateway) forward(w http.ResponseWriter, r *http.Request, prefix, scheme string, snap *xds.Snapshot, vars map[string]string,
	rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, rt *routev3.Route) error {
	cluster, wc, err := envoy.PickCluster(rt, -1)
	if err != nil {
		return err
	}
	path, err := envoy.RewritePath(rt, r.URL.Path)
	if err != nil {
		return err
	}
	host, err := envoy.RewriteHost(rt, r.Host)
	if err != nil {
		return err
	}
	// The connection manager appends the client's address to
	// X-Forwarded-For and sets X-Forwarded-Proto before the router
	// applies the route's mutations.
	r.Header.Set("X-Forwarded-For", strings.Join(append(r.Header.Values("X-Forwarded-For"), remoteIP(r)), ", "))
	r.Header.Set("X-Forwarded-Proto", scheme)
	if err := envoy.Apply(r.Header, envoy.RequestMutations(rc, vh, rt, wc), vars); err != nil {
		return err
	}
	addr, err := endpointOf(snap, cluster)
	if err != nil {
		log.Printf("%s: route %s -> %s: %v", prefix, rt.GetName(), cluster, err)
		http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
		return nil
	}
	log.Printf("%s: route %s -> %s (%s) path %s", prefix, rt.GetName(), cluster, addr, path)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL.Scheme, out.URL.Host, out.URL.Path, out.URL.RawPath = "http", addr, path, ""
			out.Host = host
			// Rewrite starts without the forwarding headers: the ones
			// above, as the route left them.
			for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Proto"} {
				if v, ok := pr.In.Header[name]; ok {
					out.Header[name] = v
				}
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			return envoy.Apply(resp.Header, envoy.ResponseMutations(rc, vh, rt, wc), vars)
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}

// endpointOf picks an endpoint of a cluster at random: from EDS (by the
// cluster's service name, else its name) or its own load assignment;
// endpoints whose health is known and not HEALTHY are left out.
func endpointOf(snap *xds.Snapshot, cluster string) (string, error) {
	c := snap.Clusters[cluster]
	if c == nil {
		return "", fmt.Errorf("cluster %s not received", cluster)
	}
	cla := c.GetLoadAssignment()
	if c.GetEdsClusterConfig() != nil || cla == nil {
		name := c.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = cluster
		}
		cla = snap.Endpoints[name]
	}
	var addrs []string
	for _, le := range cla.GetEndpoints() {
		for _, e := range le.GetLbEndpoints() {
			if hs := e.GetHealthStatus().String(); hs != "UNKNOWN" && hs != "HEALTHY" {
				continue
			}
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetAddress() != "" {
				addrs = append(addrs, net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))))
			}
		}
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("cluster %s has no healthy endpoint", cluster)
	}
	slices.Sort(addrs)
	return addrs[rand.IntN(len(addrs))], nil
}

// closeConnection closes the request's connection without a response.
func closeConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	http.Error(w, "no filter chain", http.StatusBadRequest)
}

// runXDSGateway serves istiod's listeners, and the status listener on
// statusAddr, until ctx ends.
func runXDSGateway(ctx context.Context, g *xdsGateway, namespace string, refresh time.Duration, statusAddr string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer g.closeAll()
	errs := make(chan error, 2)
	go func() { errs <- g.xds.Run(ctx) }()
	go func() {
		t := time.NewTicker(refresh)
		defer t.Stop()
		for {
			g.refreshSecrets(ctx, namespace)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	status := &http.Server{Addr: statusAddr, Handler: &g.listeners, ReadHeaderTimeout: 10 * time.Second}
	go func() { errs <- run(ctx, status, false) }()
	for {
		changed := g.xds.Changed()
		g.refreshSecrets(ctx, namespace)
		g.syncListeners(ctx, g.xds.Current())
		select {
		case err := <-errs:
			return err
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}
