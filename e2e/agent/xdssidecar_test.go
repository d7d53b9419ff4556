package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/portico-dev/portico/e2e/envoy"
	"github.com/portico-dev/portico/e2e/xds"
)

const gatewayPrincipal = "spiffe://cluster.local/ns/istio-system/sa/public-gateway"

func exactString(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func pathIs(p string) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: exactString(p)}}}}
}

func httpFilter(t *testing.T, name string, cfg proto.Message) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, cfg)}}
}

// inboundFilters are the filters istiod writes for a workload with a
// CUSTOM policy on /login, a RequestAuthentication of issuer
// https://idp.test (audience shop, keys jwks), a DENY of /debug and ALLOW
// policies: /public and /login for anyone, /admin for the gateway with
// alice's token.
func inboundFilters(t *testing.T, jwks, authzCluster string) []*hcmv3.HttpFilter {
	anyone := []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}}
	alice := &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{ //nolint:staticcheck // what Istio writes
		Filter: envoy.FilterJWTAuthn, Path: []*matcherv3.MetadataMatcher_PathSegment{
			{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "payload"}}, {Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "sub"}}},
		Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: exactString("alice")}}}}}
	gateway := &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exactString(gatewayPrincipal)}}}
	return []*hcmv3.HttpFilter{
		httpFilter(t, envoy.FilterRBAC, &rbacfilterv3.RBAC{ShadowRulesStatPrefix: "istio_ext_authz_", ShadowRules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY,
			Policies: map[string]*rbacv3.Policy{"istio-ext-authz-ns[shop]-policy[login]-rule[0]": {Permissions: []*rbacv3.Permission{pathIs("/login")}, Principals: anyone}}}}),
		httpFilter(t, envoy.FilterExtAuthz, &extauthzv3.ExtAuthz{
			FilterEnabledMetadata: &matcherv3.MetadataMatcher{Filter: envoy.FilterRBAC,
				Path:  []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "istio_ext_authz_shadow_effective_policy_id"}}},
				Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "istio-ext-authz"}}}}},
			Services: &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{
				ServerUri:             &corev3.HttpUri{Uri: "http://authz.portico-system.svc.cluster.local:8000", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: authzCluster}},
				PathPrefix:            "/check",
				AuthorizationResponse: &extauthzv3.AuthorizationResponse{AllowedUpstreamHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{exactString("x-auth-user")}}},
			}},
		}),
		httpFilter(t, envoy.FilterJWTAuthn, &jwtauthnv3.JwtAuthentication{
			Providers: map[string]*jwtauthnv3.JwtProvider{"idp": {Issuer: "https://idp.test", Audiences: []string{"shop"}, PayloadInMetadata: "payload",
				JwksSourceSpecifier: &jwtauthnv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: jwks}}}}},
			Rules: []*jwtauthnv3.RequirementRule{{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				RequirementType: &jwtauthnv3.RequirementRule_Requires{Requires: &jwtauthnv3.JwtRequirement{RequiresType: &jwtauthnv3.JwtRequirement_RequiresAny{
					RequiresAny: &jwtauthnv3.JwtRequirementOrList{Requirements: []*jwtauthnv3.JwtRequirement{
						{RequiresType: &jwtauthnv3.JwtRequirement_ProviderName{ProviderName: "idp"}},
						{RequiresType: &jwtauthnv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}},
					}}}}}}},
		}),
		httpFilter(t, envoy.FilterRBAC, &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY,
			Policies: map[string]*rbacv3.Policy{"ns[shop]-policy[deny]-rule[0]": {Permissions: []*rbacv3.Permission{pathIs("/debug")}, Principals: anyone}}}}),
		httpFilter(t, envoy.FilterRBAC, &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
			"ns[shop]-policy[public]-rule[0]": {Permissions: []*rbacv3.Permission{pathIs("/public"), pathIs("/login")}, Principals: anyone},
			"ns[shop]-policy[admin]-rule[0]": {Permissions: []*rbacv3.Permission{pathIs("/admin")}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_AndIds{
				AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{gateway, alice}}}}}},
		}}}),
		{Name: "envoy.filters.http.router"},
	}
}

// sidecarSnapshot is a sidecar's configuration: virtualInbound with a
// mutual-TLS chain and a plain-text chain for port 8080 (only the latter
// carries the filters), and the authorizer's cluster.
func sidecarSnapshot(t *testing.T, jwks, authz string) *cachev3.Snapshot {
	host, p, _ := net.SplitHostPort(authz)
	port, _ := strconv.Atoi(p)
	cluster := "outbound|8000||authz.portico-system.svc.cluster.local"
	chain := func(transport string, filters []*hcmv3.HttpFilter) *listenerv3.FilterChain {
		hcm := &hcmv3.HttpConnectionManager{StatPrefix: "inbound_0.0.0.0_8080", HttpFilters: filters,
			RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "inbound|8080||"}}}
		return &listenerv3.FilterChain{Name: "0.0.0.0_8080-" + transport,
			FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8080), TransportProtocol: transport},
			Filters:          []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)}}}}
	}
	denyAll := []*hcmv3.HttpFilter{httpFilter(t, envoy.FilterRBAC, &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW}})}
	snap, err := cachev3.NewSnapshot("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType: {&clusterv3.Cluster{Name: cluster, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{
				{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(host, uint32(port))}}}}}}}}},
		resourcev3.ListenerType: {&listenerv3.Listener{Name: "virtualInbound", Address: socket("0.0.0.0", 15006),
			FilterChains: []*listenerv3.FilterChain{chain("tls", denyAll), chain("raw_buffer", inboundFilters(t, jwks, cluster))}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestSidecarEnforcesWhatTheControlPlaneSent: the inbound chain's
// CUSTOM check, tokens, DENY and ALLOW, each as istiod configured them.
func TestSidecarEnforcesWhatTheControlPlaneSent(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	sign := func(k *ecdsa.PrivateKey, iss, sub string, aud []string, exp time.Time) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: iss, Subject: sub, Audience: aud, Expiry: jwt.NewNumericDate(exp)}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	hour := time.Now().Add(time.Hour)
	aliceToken := sign(key, "https://idp.test", "alice", []string{"shop"}, hour)
	bobToken := sign(key, "https://idp.test", "bob", []string{"shop"}, hour)
	forged := sign(other, "https://idp.test", "alice", []string{"shop"}, hour)
	expired := sign(key, "https://idp.test", "alice", []string{"shop"}, time.Now().Add(-time.Hour))
	wrongAudience := sign(key, "https://idp.test", "alice", []string{"admin"}, hour)

	authz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/check/login" || r.Header.Get("Authorization") != "Basic b2s=" {
			w.Header().Set("X-Why", "no")
			http.Error(w, "authorizer says no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Auth-User", "ada")
		w.Header().Set("X-Not-Passed", "1")
	}))
	defer authz.Close()
	addr, cache := xdsServer(t)
	node := xds.Node{Type: xds.Sidecar, IP: "10.0.0.7", PodName: "orders-1", Namespace: "shop", Labels: map[string]string{"app": "orders"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cache.SetSnapshot(ctx, node.ID(), sidecarSnapshot(t, string(jwks), authz.Listener.Addr().String())); err != nil {
		t.Fatal(err)
	}
	peer := gatewayPrincipal
	s := &xdsSidecar{xds: &xds.Client{Addr: addr, Node: node, Logf: t.Logf}, port: 8080, http: http.DefaultClient,
		jwks: &jwksCache{http: http.DefaultClient, sets: map[string]cachedJWKS{}},
		peer: func(context.Context, netip.Addr) string { return peer }}
	go func() { _ = s.xds.Run(ctx) }()
	if err := s.xds.WaitFor(ctx, func(sn *xds.Snapshot) bool { return len(sn.Listeners) == 1 && len(sn.Clusters) == 1 }); err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(s.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "app %s user=%s not-passed=%s", r.URL.Path, r.Header.Get("X-Auth-User"), r.Header.Get("X-Not-Passed"))
	})))
	defer app.Close()
	cases := []struct {
		name, path, auth, peer string
		status                 int
		body                   string
	}{
		{"public, no token", "/public", "", gatewayPrincipal, 200, "app /public"},
		{"public, a forged token", "/public", "Bearer " + forged, gatewayPrincipal, 401, ""},
		{"public, an expired token", "/public", "Bearer " + expired, gatewayPrincipal, 401, ""},
		{"public, another audience", "/public", "Bearer " + wrongAudience, gatewayPrincipal, 401, ""},
		{"admin, alice through the gateway", "/admin", "Bearer " + aliceToken, gatewayPrincipal, 200, "app /admin"},
		{"admin, bob through the gateway", "/admin", "Bearer " + bobToken, gatewayPrincipal, 403, "RBAC"},
		{"admin, alice from another pod", "/admin", "Bearer " + aliceToken, "spiffe://cluster.local/ns/team-b/sa/default", 403, "RBAC"},
		{"admin, no token", "/admin", "", gatewayPrincipal, 403, "RBAC"},
		{"denied path with alice", "/debug", "Bearer " + aliceToken, gatewayPrincipal, 403, "RBAC"},
		{"login, the authorizer allows", "/login", "Basic b2s=", gatewayPrincipal, 200, "app /login user=ada not-passed="},
		{"login, the authorizer denies", "/login", "Basic bm8=", gatewayPrincipal, 401, "authorizer says no"},
	}
	for _, c := range cases {
		peer = c.peer
		req, _ := http.NewRequest(http.MethodGet, app.URL+c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		req.Header.Set("X-Auth-User", "forged")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || c.body != "" && !strings.Contains(string(body), c.body) {
			t.Errorf("%s: %d %q; want %d %q", c.name, resp.StatusCode, body, c.status, c.body)
		}
	}
}

// TestPodIdentityLooksOnlyWhereItMayRead: the peer's identity is the
// ServiceAccount of the running pod with its address, found only in the
// namespaces listed; a peer elsewhere, on the host's network or not
// running has none.
func TestPodIdentityLooksOnlyWhereItMayRead(t *testing.T) {
	pod := func(ns, name, sa, ip string, phase corev1.PodPhase, hostNetwork bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:   corev1.PodSpec{ServiceAccountName: sa, HostNetwork: hostNetwork},
			Status: corev1.PodStatus{Phase: phase, PodIP: ip}}
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&corev1.Pod{}, "status.podIP", func(o client.Object) []string { return []string{o.(*corev1.Pod).Status.PodIP} }).
		WithObjects(
			pod("istio-system", "gateway", "public-gateway", "10.0.0.1", corev1.PodRunning, false),
			pod("shop", "client", "", "10.0.0.2", corev1.PodRunning, false),
			pod("team-b", "intruder", "admin", "10.0.0.3", corev1.PodRunning, false),
			pod("shop", "finished", "old", "10.0.0.4", corev1.PodSucceeded, false),
			pod("shop", "host", "node", "10.0.0.5", corev1.PodRunning, true),
		).Build()
	cases := map[string]struct {
		namespaces []string
		ip         string
		want       string
	}{
		"the gateway, from its namespace":       {[]string{"istio-system", "shop"}, "10.0.0.1", "spiffe://cluster.local/ns/istio-system/sa/public-gateway"},
		"a pod of the default ServiceAccount":   {[]string{"istio-system", "shop"}, "10.0.0.2", "spiffe://cluster.local/ns/shop/sa/default"},
		"a pod of a namespace not listed":       {[]string{"istio-system", "shop"}, "10.0.0.3", ""},
		"the same pod when every one is read":   {nil, "10.0.0.3", "spiffe://cluster.local/ns/team-b/sa/admin"},
		"a pod that is not running any more":    {[]string{"shop"}, "10.0.0.4", ""},
		"a pod on the node's network":           {[]string{"shop"}, "10.0.0.5", ""},
		"an address of no pod (a host process)": {nil, "10.0.0.9", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := podIdentity(c, tc.namespaces)(context.Background(), netip.MustParseAddr(tc.ip))
			if got != tc.want {
				t.Errorf("identity of %s: %q, want %q", tc.ip, got, tc.want)
			}
		})
	}
}
