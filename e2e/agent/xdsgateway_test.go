package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/portico-dev/portico/e2e/envoy"
	"github.com/portico-dev/portico/e2e/xds"
)

// xdsServer is go-control-plane's own xDS server over a snapshot cache.
func xdsServer(t *testing.T) (string, cachev3.SnapshotCache) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, serverv3.NewServer(ctx, cache, nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), cache
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

func socket(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

// hcmChain is a filter chain whose HTTP connection manager takes route
// configuration rds from ADS.
func hcmChain(t *testing.T, rds string) *listenerv3.FilterChain {
	return &listenerv3.FilterChain{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager",
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &hcmv3.HttpConnectionManager{StatPrefix: rds,
			RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: rds, ConfigSource: ads()}}})}}}}
}

func setHeader(name, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

// gatewaySnapshot is what istiod would send an ingress gateway with an
// HTTP server on plainPort and an HTTPS server (credential orders-cert,
// MUTUAL) on tlsPort for orders.example.com, routing to backend
// (host:port).
func gatewaySnapshot(t *testing.T, version, backend string, plainPort, tlsPort uint32) *cachev3.Snapshot {
	t.Helper()
	host, p, _ := net.SplitHostPort(backend)
	port, _ := strconv.Atoi(p)
	cluster := "outbound|8080||orders.shop.svc.cluster.local"
	routes := []*routev3.Route{
		{Name: "api", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/api/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{PrefixRewrite: "/v1/", ClusterSpecifier: &routev3.RouteAction_WeightedClusters{
				WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
					{Name: cluster, Weight: wrapperspb.UInt32(100), RequestHeadersToAdd: []*corev3.HeaderValueOption{setHeader("x-split", "main")}},
					{Name: "outbound|8080||drained.shop.svc.cluster.local", Weight: wrapperspb.UInt32(0)},
				}}}}},
			RequestHeadersToAdd:     []*corev3.HeaderValueOption{setHeader("x-route", "api"), setHeader("x-forwarded-for", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%")},
			RequestHeadersToRemove:  []string{"x-debug"},
			ResponseHeadersToAdd:    []*corev3.HeaderValueOption{setHeader("strict-transport-security", "max-age=60")},
			ResponseHeadersToRemove: []string{"x-backend"}},
		{Name: "gone", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/gone"}},
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 410,
				Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "gone"}}}}},
		{Name: "old", Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/old/"}},
			Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/new/"}, ResponseCode: routev3.RedirectAction_FOUND}}},
	}
	tlsChain := hcmChain(t, "https.8443.orders")
	tlsChain.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: []string{"orders.example.com"}}
	tlsChain.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "kubernetes://orders-cert"}},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext: &tlsv3.CertificateValidationContext{}, ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "kubernetes://orders-cert-cacert"}}},
		}})}}
	// health.example.com: client CAs from a ConfigMap (the default
	// gateway's caCertCredentialName configmap://NS/NAME), required.
	healthChain := hcmChain(t, "https.8443.orders")
	healthChain.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: []string{"health.example.com"}}
	healthChain.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "kubernetes://orders-cert"}},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext: &tlsv3.CertificateValidationContext{}, ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "configmap://istio-system/health-clients"}}},
		}})}}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType: {&clusterv3.Cluster{Name: cluster, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: cluster, EdsConfig: ads()}}},
		resourcev3.EndpointType: {&endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{
			{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(host, uint32(port))}}},
			{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket("192.0.2.1", 9)}}, HealthStatus: corev3.HealthStatus_UNHEALTHY},
		}}}}},
		resourcev3.ListenerType: {
			&listenerv3.Listener{Name: fmt.Sprintf("0.0.0.0_%d", plainPort), Address: socket("0.0.0.0", plainPort), FilterChains: []*listenerv3.FilterChain{hcmChain(t, "http.8080")}},
			&listenerv3.Listener{Name: fmt.Sprintf("0.0.0.0_%d", tlsPort), Address: socket("0.0.0.0", tlsPort), FilterChains: []*listenerv3.FilterChain{tlsChain, healthChain}},
		},
		resourcev3.RouteType: {
			&routev3.RouteConfiguration{Name: "http.8080", VirtualHosts: []*routev3.VirtualHost{
				{Name: "orders.example.com:80", Domains: []string{"orders.example.com", "orders.example.com:*"}, Routes: routes},
				{Name: "secure.example.com:80", Domains: []string{"secure.example.com"}, RequireTls: routev3.VirtualHost_ALL},
			}},
			&routev3.RouteConfiguration{Name: "https.8443.orders", VirtualHosts: []*routev3.VirtualHost{
				{Name: "orders.example.com:443", Domains: []string{"orders.example.com"}, Routes: routes[:1]},
				{Name: "health.example.com:443", Domains: []string{"health.example.com"}, Routes: routes[:1]},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestGatewayServesWhatTheControlPlaneSent: routing, rewrites, weighted
// clusters, header mutations, direct responses, redirects, require_tls,
// EDS endpoints and the TLS certificate and client CAs of the SDS names,
// all from xDS.
func TestGatewayServesWhatTheControlPlaneSent(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", "orders")
		fmt.Fprintf(w, "%s %s host=%s x-route=%s x-split=%s x-debug=%q xff=%s\n", r.Method, r.URL.Path, r.Host,
			r.Header.Get("X-Route"), r.Header.Get("X-Split"), r.Header.Get("X-Debug"), r.Header.Get("X-Forwarded-For"))
	}))
	defer backend.Close()
	addr, cache := xdsServer(t)
	ca := newCA(t, "gateway CA")
	certPEM, keyPEM := ca.issue(t, "orders.example.com")
	clientCA := newCA(t, "client CA")
	healthCA := newCA(t, "health client CA")
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "orders-cert"}, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "orders-cert-cacert"}, Data: map[string][]byte{"ca.crt": clientCA.pem}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "health-clients"}, Data: map[string]string{"ca.crt": string(healthCA.pem)}},
		// Never read: configmap:// names a ConfigMap, not a Secret.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "health-clients"}, Data: map[string][]byte{"ca.crt": clientCA.pem}},
	).Build()
	rt := &router{client: kube}
	rt.limiter = &limiter{rt: rt}
	rt.globals.Store(&[]globalFilter{})
	node := xds.Node{Type: xds.Router, IP: "10.0.0.9", PodName: "gw-1", Namespace: "istio-system", Labels: map[string]string{"istio": "ingressgateway"}}
	g := &xdsGateway{xds: &xds.Client{Addr: addr, Node: node, Logf: t.Logf}, rt: rt}
	g.init()
	defer g.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plainPort, tlsPort := freePort(t), freePort(t)
	if err := cache.SetSnapshot(ctx, node.ID(), gatewaySnapshot(t, "1", backend.Listener.Addr().String(), plainPort, tlsPort)); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.xds.Run(ctx) }()
	if err := g.xds.WaitFor(ctx, func(s *xds.Snapshot) bool { return len(s.Routes) == 2 && len(s.Endpoints) == 1 }); err != nil {
		t.Fatal(err)
	}
	g.refreshSecrets(ctx, "istio-system")
	// istiod's listeners, bound on their own ports.
	g.syncListeners(ctx, g.xds.Current())
	plain := fmt.Sprintf("http://127.0.0.1:%d", plainPort)
	secure := fmt.Sprintf("https://127.0.0.1:%d", tlsPort)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name, host, path string
		headers          map[string]string
		status           int
		body             string
		header           [2]string
	}{
		{"routed, rewritten, mutated", "orders.example.com", "/api/x", map[string]string{"X-Debug": "1", "X-Forwarded-For": "6.6.6.6"}, 200,
			`GET /v1/x host=orders.example.com x-route=api x-split=main x-debug="" xff=127.0.0.1`, [2]string{"Strict-Transport-Security", "max-age=60"}},
		{"the backend's header removed", "orders.example.com:8080", "/api/y", nil, 200, "GET /v1/y", [2]string{"X-Backend", ""}},
		{"direct response", "orders.example.com", "/gone", nil, 410, "gone", [2]string{}},
		{"redirect", "orders.example.com", "/old/a", nil, 302, "", [2]string{"Location", "http://orders.example.com/new/a"}},
		{"require_tls", "secure.example.com", "/a?b=1", nil, 301, "", [2]string{"Location", "https://secure.example.com/a?b=1"}},
		{"no route", "orders.example.com", "/other", nil, 404, "", [2]string{}},
		{"no virtual host", "other.example.com", "/api/x", nil, 404, "", [2]string{}},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodGet, plain+c.path, nil)
		req.Host = c.host
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) || c.header[0] != "" && resp.Header.Get(c.header[0]) != c.header[1] {
			t.Errorf("%s: %d %q %s=%q; want %d %q %q", c.name, resp.StatusCode, body, c.header[0], resp.Header.Get(c.header[0]), c.status, c.body, c.header[1])
		}
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	var getSNI func(sni string, certs ...tls.Certificate) (string, error)
	clientCert, clientKey := clientCA.issue(t, "")
	pair, _ := tls.X509KeyPair(clientCert, clientKey)
	healthCert, healthKey := healthCA.issue(t, "")
	healthPair, _ := tls.X509KeyPair(healthCert, healthKey)
	get := func(certs ...tls.Certificate) (string, error) { return getSNI("orders.example.com", certs...) }
	getSNI = func(sni string, certs ...tls.Certificate) (string, error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: sni, Certificates: certs,
			InsecureSkipVerify: sni == "health.example.com"}}} //nolint:gosec // the serving certificate is orders.example.com's
		req, _ := http.NewRequest(http.MethodGet, secure+"/api/z", nil)
		req.Host = sni
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b), nil
	}
	if got, err := get(pair); err != nil || !strings.HasPrefix(got, "200 GET /v1/z") {
		t.Errorf("https with a client certificate: %q, %v", got, err)
	}
	if got, err := get(); err == nil {
		t.Errorf("https without a client certificate was answered: %q", got)
	}
	// The TLS-only listener has no plain-text chain: closed, unanswered.
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/z", tlsPort)); err == nil {
		resp.Body.Close()
		t.Errorf("plain text to the TLS listener was answered %d", resp.StatusCode)
	}
	if got, err := getSNI("health.example.com", healthPair); err != nil || !strings.HasPrefix(got, "200 GET /v1/z") {
		t.Errorf("https to health.example.com with a certificate of the ConfigMap's CA: %q, %v", got, err)
	}
	for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "a certificate of the same-named Secret's CA": {pair}} {
		if got, err := getSNI("health.example.com", certs...); err == nil {
			t.Errorf("https to health.example.com with %s was answered: %q", name, got)
		}
	}
}

// freePort is a TCP port free now on 127.0.0.1.
func freePort(t *testing.T) uint32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint32(l.Addr().(*net.TCPAddr).Port)
}

// TestGatewayBindsIstiodsListeners: a listener istiod adds is bound on
// its port, one it removes is closed, and the status listener is ready
// only while every listener istiod sent is bound (a port already taken
// keeps it unready).
func TestGatewayBindsIstiodsListeners(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer backend.Close()
	addr, cache := xdsServer(t)
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	rt := &router{client: fake.NewClientBuilder().WithScheme(scheme).Build()}
	node := xds.Node{Type: xds.Router, IP: "10.0.0.9", PodName: "gw-1", Namespace: "istio-system"}
	g := &xdsGateway{xds: &xds.Client{Addr: addr, Node: node, Logf: t.Logf}, rt: rt}
	g.init()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status := httptest.NewServer(&g.listeners)
	defer status.Close()
	ready := func() (int, string) {
		resp, err := http.Get(status.URL + "/healthz/ready")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("ready before istiod sent anything: %d %s", code, body)
	}
	go func() { _ = g.xds.Run(ctx) }()
	defer g.closeAll()
	set := func(version string, plainPort, tlsPort uint32) {
		t.Helper()
		changed := g.xds.Changed()
		if err := cache.SetSnapshot(ctx, node.ID(), gatewaySnapshot(t, version, backend.Listener.Addr().String(), plainPort, tlsPort)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		if err := g.xds.WaitFor(ctx, func(s *xds.Snapshot) bool {
			return len(listenerPorts(s)) == 2 && listenerPorts(s)[plainPort] != "" && len(s.Routes) == 2
		}); err != nil {
			t.Fatal(err)
		}
		g.refreshSecrets(ctx, "istio-system")
		g.syncListeners(ctx, g.xds.Current())
	}
	get := func(port uint32) error {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/gone", port), nil)
		req.Host = "orders.example.com"
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGone {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	first, second, tlsPort := freePort(t), freePort(t), freePort(t)
	set("1", first, tlsPort)
	if err := get(first); err != nil {
		t.Errorf("istiod's listener on %d is not served: %v", first, err)
	}
	if code, body := ready(); code != http.StatusOK {
		t.Errorf("not ready with every listener bound: %d %s", code, body)
	}
	set("2", second, tlsPort)
	if err := get(second); err != nil {
		t.Errorf("the listener istiod moved to %d is not served: %v", second, err)
	}
	if err := get(first); err == nil {
		t.Errorf("the listener istiod removed (%d) still answers", first)
	}
	taken, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	set("3", uint32(taken.Addr().(*net.TCPAddr).Port), tlsPort)
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, "address already in use") {
		t.Errorf("ready with a listener that cannot be bound: %d %s", code, body)
	}
}

// TestSDSNamesReadAsIstiodServesThem: the SDS names istiod puts in a
// gateway's listeners, read as istiod's SDS serves them
// (pilot/pkg/model/credentials, pilot/pkg/credentials/kube): the type and
// namespace of the name, the -cacert suffix (its own Secret first, then
// the credential's, with no fallback once the first exists), the key
// order (cacert before ca.crt, cert/key before tls.crt/tls.key).
func TestSDSNamesReadAsIstiodServesThem(t *testing.T) {
	ca, other := newCA(t, "clients"), newCA(t, "other")
	servingCert, servingKey := ca.issue(t, "gw.example.com")
	otherCert, otherKey := other.issue(t, "gw.example.com")
	secret := func(ns, name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	}
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secret("gw", "tls", map[string][]byte{"tls.crt": otherCert, "tls.key": otherKey, "cert": servingCert, "key": servingKey, "ca.crt": other.pem, "cacert": ca.pem}),
		secret("gw", "split", map[string][]byte{"tls.crt": servingCert, "tls.key": servingKey, "ca.crt": other.pem}),
		secret("gw", "split-cacert", map[string][]byte{"ca.crt": ca.pem}),
		secret("gw", "empty", map[string][]byte{"tls.crt": servingCert, "tls.key": servingKey, "ca.crt": ca.pem}),
		secret("gw", "empty-cacert", map[string][]byte{"other": ca.pem}),
		secret("gw", "blank-cacert", map[string][]byte{"cacert": nil, "ca.crt": ca.pem}),
		secret("gw", "blanker-cacert", map[string][]byte{"cacert": nil}),
		secret("elsewhere", "tls", map[string][]byte{"tls.crt": servingCert, "tls.key": servingKey}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gw", Name: "clients"}, Data: map[string]string{"ca.crt": string(ca.pem)}},
		secret("gw", "clients", map[string][]byte{"ca.crt": other.pem, "tls.crt": otherCert, "tls.key": otherKey}),
	).Build()
	g := &xdsGateway{rt: &router{client: kube}}
	leaf := func(p []byte) *x509.Certificate {
		b, _ := pem.Decode(p)
		c, _ := x509.ParseCertificate(b.Bytes)
		return c
	}
	clientOf := func(p pki) *x509.Certificate { c, _ := p.issue(t, ""); return leaf(c) }
	cases := []struct {
		name, sds string
		cert      []byte // the certificate served, or
		trusts    *pki   // the CA trusted, or
		err       string // why nothing is served
	}{
		{name: "cert and key before tls.crt and tls.key", sds: "kubernetes://tls", cert: servingCert},
		{name: "an explicit namespace, the proxy's", sds: "kubernetes://gw/tls", cert: servingCert},
		{name: "cacert before ca.crt", sds: "kubernetes://tls-cacert", trusts: &ca},
		{name: "NAME-cacert before NAME's ca.crt", sds: "kubernetes://split-cacert", trusts: &ca},
		{name: "an existing NAME-cacert without CAs: no fallback", sds: "kubernetes://empty-cacert", err: "no key cacert or ca.crt"},
		{name: "an empty cacert, then ca.crt", sds: "kubernetes://blank-cacert", trusts: &ca},
		{name: "only an empty cacert", sds: "kubernetes://blanker-cacert", err: `found key "cacert", but it was empty`},
		{name: "another namespace's Secret", sds: "kubernetes://elsewhere/tls", err: "another namespace"},
		{name: "a ConfigMap's CAs, never the Secret of its name", sds: "configmap://gw/clients", trusts: &ca},
		{name: "a ConfigMap with -cacert", sds: "configmap://gw/clients-cacert", trusts: &ca},
		{name: "configmap:// without a namespace", sds: "configmap://clients", err: "NAMESPACE/NAME"},
		{name: "the bare name of a ConfigMap is a Secret", sds: "kubernetes://clients", cert: otherCert},
		{name: "a missing Secret", sds: "kubernetes://absent-cacert", err: "not found"},
		{name: "not a cluster source", sds: "sds://vault-ca", err: "not one istiod serves"},
		{name: "no type", sds: "tls", err: "TYPE://NAME"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := g.readSecret(ctx, "gw", c.sds)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("%s: %v (%s), want an error with %q", c.sds, err, s.from, c.err)
				}
			case err != nil:
				t.Errorf("%s: %v", c.sds, err)
			case c.cert != nil:
				if s.cert == nil || string(s.cert.Certificate[0]) != string(leaf(c.cert).Raw) {
					t.Errorf("%s: served %s, not the expected certificate", c.sds, s.from)
				}
			default:
				if s.cas == nil {
					t.Fatalf("%s: no CAs (%s)", c.sds, s.from)
				}
				for p, want := range map[*pki]bool{c.trusts: true, &other: c.trusts == &other} {
					_, verr := clientOf(*p).Verify(x509.VerifyOptions{Roots: s.cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
					if (verr == nil) != want {
						t.Errorf("%s (%s): a client of %s verifies: %v, want %v", c.sds, s.from, p.cert.Subject.CommonName, verr == nil, want)
					}
				}
			}
		})
	}
}

// withCertificate renames the TLS certificate SDS secret of snap's
// listeners from kubernetes://orders-cert to name, with Envoy's initial
// fetch timeout fetch (nil: unset, Envoy's 15 s).
func withCertificate(t *testing.T, snap *cachev3.Snapshot, name string, fetch *durationpb.Duration) *cachev3.Snapshot {
	t.Helper()
	for _, r := range snap.GetResources(resourcev3.ListenerType) {
		l := r.(*listenerv3.Listener)
		for _, fc := range l.GetFilterChains() {
			tc := &tlsv3.DownstreamTlsContext{}
			ts := fc.GetTransportSocket()
			if ts == nil || ts.GetTypedConfig().UnmarshalTo(tc) != nil {
				continue
			}
			for _, c := range tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
				if c.GetName() == "kubernetes://orders-cert" {
					c.Name, c.SdsConfig = name, &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, InitialFetchTimeout: fetch}
				}
			}
			ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, tc)}
		}
	}
	return snap
}

// TestGatewayWarmsListenersAsEnvoy: a listener istiod changes to a
// certificate not loaded yet does not replace the serving one (Envoy warms
// it): handshakes go on with the old certificate, the new one is served
// once its Secret exists; a listener whose secret never comes is
// activated after its initial fetch timeout, and its handshakes fail.
func TestGatewayWarmsListenersAsEnvoy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer backend.Close()
	addr, cache := xdsServer(t)
	oldCA, nextCA := newCA(t, "old CA"), newCA(t, "new CA")
	oldCert, oldKey := oldCA.issue(t, "orders.example.com")
	newCert, newKey := nextCA.issue(t, "orders.example.com")
	clientCA := newCA(t, "client CA")
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "orders-cert"}, Data: map[string][]byte{corev1.TLSCertKey: oldCert, corev1.TLSPrivateKeyKey: oldKey}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "orders-cert-cacert"}, Data: map[string][]byte{"ca.crt": clientCA.pem}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "health-clients"}, Data: map[string]string{"ca.crt": string(clientCA.pem)}},
	).Build()
	node := xds.Node{Type: xds.Router, IP: "10.0.0.9", PodName: "gw-1", Namespace: "istio-system"}
	g := &xdsGateway{xds: &xds.Client{Addr: addr, Node: node, Logf: t.Logf}, rt: &router{client: kube}}
	g.init()
	defer g.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { _ = g.xds.Run(ctx) }()
	plainPort, tlsPort := freePort(t), freePort(t)
	push := func(version string, snap *cachev3.Snapshot, cert string) {
		t.Helper()
		if err := cache.SetSnapshot(ctx, node.ID(), snap); err != nil {
			t.Fatal(err)
		}
		if err := g.xds.WaitFor(ctx, func(s *xds.Snapshot) bool {
			_, ok := listenerSDSNames(envoy.ListenerOnPort(s.Listeners, tlsPort))[cert]
			return len(s.Routes) == 2 && ok
		}); err != nil {
			t.Fatalf("version %s: %v", version, err)
		}
		g.refreshSecrets(ctx, "istio-system")
		g.syncListeners(ctx, g.xds.Current())
	}
	roots := x509.NewCertPool()
	roots.AddCert(oldCA.cert)
	roots.AddCert(nextCA.cert)
	clientCert, clientKey := clientCA.issue(t, "")
	pair, _ := tls.X509KeyPair(clientCert, clientKey)
	served := func() (string, error) {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tlsPort), &tls.Config{RootCAs: roots, ServerName: "orders.example.com", Certificates: []tls.Certificate{pair}})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		if err := conn.Handshake(); err != nil {
			return "", err
		}
		return conn.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
	}
	push("1", gatewaySnapshot(t, "1", backend.Listener.Addr().String(), plainPort, tlsPort), "kubernetes://orders-cert")
	if got, err := served(); err != nil || got != "old CA" {
		t.Fatalf("version 1 serves %q, %v", got, err)
	}
	push("2", withCertificate(t, gatewaySnapshot(t, "2", backend.Listener.Addr().String(), plainPort, tlsPort), "kubernetes://new-cert", nil), "kubernetes://new-cert")
	if got, err := served(); err != nil || got != "old CA" {
		t.Errorf("while the new listener warms, the serving one goes on: %q, %v", got, err)
	}
	if err := kube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "new-cert"},
		Data: map[string][]byte{corev1.TLSCertKey: newCert, corev1.TLSPrivateKeyKey: newKey}}); err != nil {
		t.Fatal(err)
	}
	g.refreshSecrets(ctx, "istio-system")
	if got, err := served(); err != nil || got != "new CA" {
		t.Errorf("once its secret is loaded, the new listener serves: %q, %v", got, err)
	}
	push("3", withCertificate(t, gatewaySnapshot(t, "3", backend.Listener.Addr().String(), plainPort, tlsPort), "kubernetes://never-cert", durationpb.New(time.Millisecond)), "kubernetes://never-cert")
	time.Sleep(5 * time.Millisecond)
	g.refreshSecrets(ctx, "istio-system")
	if got, err := served(); err == nil {
		t.Errorf("after its initial fetch timeout the listener without its secret serves: %q", got)
	}
}
