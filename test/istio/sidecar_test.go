package istio

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networkingapi "istio.io/api/networking/v1alpha3"
	securityapi "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/schema/gvk"

	"github.com/portico-dev/portico/e2e/envoy"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// The Service every external authorizer of the policies is served by.
const (
	authorizerNamespace = "portico-system"
	authorizerHost      = "authz.portico-system.svc.cluster.local"
)

// sidecarFilters are the HTTP filters istiod generates for the inbound
// HTTP traffic of a sidecar in namespace with labels, from the policies.
func sidecarFilters(t *testing.T, policies judge.Policies, namespace string, labels map[string]string) []*hcmv3.HttpFilter {
	t.Helper()
	var configs []config.Config
	providers := map[string]bool{}
	for _, ap := range policies.AuthorizationPolicies {
		configs = append(configs, config.Config{Meta: config.Meta{GroupVersionKind: gvk.AuthorizationPolicy, Namespace: ap.Namespace, Name: ap.Name},
			Spec: proto.Clone(&ap.Spec).(*securityapi.AuthorizationPolicy)})
		if p := ap.Spec.GetProvider().GetName(); p != "" {
			providers[p] = true
		}
	}
	for _, ra := range policies.RequestAuthentications {
		configs = append(configs, config.Config{Meta: config.Meta{GroupVersionKind: gvk.RequestAuthentication, Namespace: ra.Namespace, Name: ra.Name},
			Spec: proto.Clone(&ra.Spec).(*securityapi.RequestAuthentication)})
	}
	if len(providers) > 0 {
		// The authorizers' Service, so that istiod resolves the providers.
		configs = append(configs, config.Config{Meta: config.Meta{GroupVersionKind: gvk.ServiceEntry, Namespace: authorizerNamespace, Name: "authz"},
			Spec: &networkingapi.ServiceEntry{Hosts: []string{authorizerHost}, Ports: []*networkingapi.ServicePort{{Number: 8000, Name: "http", Protocol: "HTTP"}},
				Location: networkingapi.ServiceEntry_MESH_INTERNAL, Resolution: networkingapi.ServiceEntry_STATIC,
				Endpoints: []*networkingapi.WorkloadEntry{{Address: "10.0.0.50"}}}})
	}
	m := mesh.DefaultMeshConfig()
	for _, name := range slices.Sorted(maps.Keys(providers)) {
		m.ExtensionProviders = append(m.ExtensionProviders, &meshconfig.MeshConfig_ExtensionProvider{Name: name,
			Provider: &meshconfig.MeshConfig_ExtensionProvider_EnvoyExtAuthzHttp{EnvoyExtAuthzHttp: &meshconfig.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider{
				Service: authorizerHost, Port: 8000}}})
	}
	cg := core.NewConfigGenTest(t, core.TestOptions{Configs: configs, MeshConfig: m})
	proxy := cg.SetupProxy(&model.Proxy{Labels: labels, Metadata: &model.NodeMetadata{Namespace: namespace, Labels: labels}, ConfigNamespace: namespace})
	for _, l := range cg.Listeners(proxy) {
		if l.GetName() != model.VirtualInboundListenerName {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			if fc.GetName() == model.VirtualInboundCatchAllHTTPFilterChainName {
				return httpFilters(t, fc)
			}
		}
	}
	t.Fatalf("istiod generated no %s filter chain for a sidecar in %s with %v", model.VirtualInboundCatchAllHTTPFilterChainName, namespace, labels)
	return nil
}

func httpFilters(t *testing.T, fc *listenerv3.FilterChain) []*hcmv3.HttpFilter {
	t.Helper()
	for _, f := range fc.GetFilters() {
		h := &hcmv3.HttpConnectionManager{}
		if f.GetTypedConfig().UnmarshalTo(h) == nil && f.GetName() == "envoy.filters.network.http_connection_manager" {
			return h.GetHttpFilters()
		}
	}
	t.Fatalf("filter chain %s has no HTTP connection manager", fc.GetName())
	return nil
}

// probeToken is the token a probe request carries, where the judge's
// token says; probeVerifier knows it as that judge token.
const probeToken = "probe-token"

// probeRequest is the request a sidecar sees for a judge request: the
// token placed where the judge's token is carried.
func probeRequest(path, method string, peer judge.Peer, tok *judge.Token) envoy.AccessRequest {
	r := envoy.AccessRequest{Request: envoy.Request{Host: "orders.example.com", Path: path, Method: method, Headers: map[string]string{}},
		Downstream: envoy.Downstream{Port: 8080, Principal: "spiffe://" + peer.Principal, DirectIP: peer.IP, RemoteIP: peer.RemoteIP}}
	if tok == nil {
		return r
	}
	at := tokenPlace(tok)
	if at.Param != "" {
		r.Query = url.Values{at.Param: {probeToken}}.Encode()
	} else {
		r.Headers[strings.ToLower(at.Header)] = at.Prefix + probeToken
	}
	return r
}

// probeVerifier verifies the probe's token as a provider with the judge
// token's issuer, key set (the remote JWKS's URI) and, if it names
// audiences, one of them would: its payload holds the token's claims.
func probeVerifier(tok *judge.Token) envoy.Verifier {
	return func(_ string, p *jwtauthnv3.JwtProvider, token string) (map[string]any, error) {
		if tok == nil || token != probeToken {
			return nil, fmt.Errorf("not the probe's token: %q", token)
		}
		if p.GetIssuer() != "" && p.GetIssuer() != tok.Issuer {
			return nil, fmt.Errorf("issuer %s, want %s", tok.Issuer, p.GetIssuer())
		}
		if p.GetRemoteJwks().GetHttpUri().GetUri() != tok.KeySet {
			return nil, fmt.Errorf("signed by the keys of %s, not %s", tok.KeySet, p.GetRemoteJwks().GetHttpUri().GetUri())
		}
		if len(p.GetAudiences()) > 0 && !slices.ContainsFunc(tok.Audiences, func(a string) bool { return slices.Contains(p.GetAudiences(), a) }) {
			return nil, fmt.Errorf("audiences %v, want one of %v", tok.Audiences, p.GetAudiences())
		}
		return tokenPayload(tok), nil
	}
}

// tokenPlace is where a token is carried, as a jwt_authn location.
func tokenPlace(tok *judge.Token) judge.Place {
	if tok.In == (judge.Place{}) {
		return judge.InHeader("authorization", "Bearer ")
	}
	return tok.In
}

// tokenPayload is a verified token's payload as jwt_authn writes it.
func tokenPayload(tok *judge.Token) map[string]any {
	payload := map[string]any{"iss": tok.Issuer, "sub": tok.Subject}
	list := func(vs []string) []any {
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = v
		}
		return out
	}
	if len(tok.Audiences) > 0 {
		payload["aud"] = list(tok.Audiences)
	}
	if len(tok.Scopes) > 0 {
		payload["scope"] = list(tok.Scopes)
	}
	for k, v := range tok.Claims {
		payload[k] = list(v)
	}
	return payload
}

func judgeDecision(v judge.Verdict) envoy.Decision {
	switch {
	case v.Decision == judge.Allowed:
		return envoy.Allowed
	case v.Decision == judge.Unauthenticated:
		return envoy.Unauthenticated
	case strings.HasPrefix(v.Reason, "CUSTOM"):
		return envoy.ToAuthorizer
	}
	return envoy.Denied
}

// The tokens and peers the sidecars are probed with.
var (
	probeTokens = []*judge.Token{
		nil,
		{Issuer: "https://idp.example.com", KeySet: "https://idp.example.com/jwks.json", Subject: "alice", Audiences: []string{"shop"}, Scopes: []string{"admin"}},
		{Issuer: "https://idp.example.com", KeySet: "https://idp.example.com/jwks.json", Subject: "bob", Audiences: []string{"admin"}},
		{Issuer: "https://idp.example.com", KeySet: "https://other.example.com/jwks.json", Subject: "mallory", Audiences: []string{"shop"}, Scopes: []string{"admin"}},
		{Issuer: "https://idp.example.com/evil", KeySet: "https://evil.example.com/jwks.json", Subject: "eve", Audiences: []string{"shop", "admin"}, Scopes: []string{"admin"}},
		{Issuer: "https://idp.example.com", KeySet: "https://idp.example.com/jwks.json", Subject: "carol", Audiences: []string{"shop"}, In: judge.InHeader("x-jwt", "Bearer ")},
		{Issuer: "https://idp.example.com", KeySet: "https://idp.example.com/jwks.json", Subject: "dave", Audiences: []string{"shop", "admin"}, Scopes: []string{"admin"}, In: judge.InParam("token")},
	}
	probePeers = []judge.Peer{
		judge.IngressGateway,
		{Principal: judge.IngressGateway.Principal, IP: judge.IngressGateway.IP, RemoteIP: netip.MustParseAddr("198.51.100.9")},
		{Principal: "cluster.local/ns/analytics/sa/default", IP: netip.MustParseAddr("10.0.0.9"), RemoteIP: netip.MustParseAddr("10.0.0.9")},
	}
)

// workloadLabels are the label sets the translation's policies select:
// one sidecar each.
func workloadLabels(policies judge.Policies) []map[string]string {
	seen := map[string]map[string]string{}
	add := func(labels map[string]string) {
		keys := slices.Sorted(maps.Keys(labels))
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k + "=" + labels[k] + ",")
		}
		seen[b.String()] = labels
	}
	for _, ap := range policies.AuthorizationPolicies {
		add(ap.Spec.GetSelector().GetMatchLabels())
	}
	for _, ra := range policies.RequestAuthentications {
		add(ra.Spec.GetSelector().GetMatchLabels())
	}
	keys := slices.Sorted(maps.Keys(seen))
	out := make([]map[string]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, seen[k])
	}
	return out
}

func policiesOf(o output) judge.Policies {
	var p judge.Policies
	for _, w := range o.Workloads {
		for _, ap := range []*securityv1.AuthorizationPolicy{w.AuthorizationPolicy, w.CustomPolicy} {
			if ap != nil {
				p.AuthorizationPolicies = append(p.AuthorizationPolicies, ap)
			}
		}
		if w.RequestAuthentication != nil {
			p.RequestAuthentications = append(p.RequestAuthentications, w.RequestAuthentication)
		}
	}
	return p
}

// TestJudgeDecidesAsIstiosSidecars asks the tenancy judge whether each
// probe request (paths, methods, tokens in their places, peers and client
// addresses) reaches each workload of each translation's access control,
// and checks its answer against the RBAC and jwt_authn filters istiod
// generates for that workload's sidecar from the same policies: allowed,
// rejected (401), denied (403) or handed to an external authorizer.
func TestJudgeDecidesAsIstiosSidecars(t *testing.T) {
	trs := translations(t)
	checkCoverage(t, trs)
	seen := tally{}
	var compared, declined, disagreements int
	for _, tr := range trs {
		if tr.isHTTPRoute() || tr.VirtualService == nil {
			continue // HTTPRoute mode writes the same access control (FuzzTranslate)
		}
		policies := policiesOf(tr.output)
		paths := requestPaths(tr.VirtualService)
		for _, labels := range workloadLabels(policies) {
			fs := sidecarFilters(t, policies, tr.VirtualService.Namespace, labels)
			w := judge.Workload{Namespace: tr.VirtualService.Namespace, Labels: labels}
			for _, path := range paths {
				for _, method := range []string{"GET", "POST"} {
					for _, tok := range probeTokens {
						for _, peer := range probePeers {
							jr := judge.Request{Workload: w, Host: "orders.example.com", Path: path, Method: method, Port: 8080, Token: tok, From: peer}
							jv, err := judge.Judge(policies, jr)
							if err != nil {
								declined++
								continue
							}
							out, err := envoy.Evaluate(fs, probeRequest(path, method, peer, tok), probeVerifier(tok), nil)
							ed, why := out.Decision, out.Filter+": "+out.Reason
							if err != nil {
								t.Errorf("%s: workload %v: %s: Envoy's configuration is not modelled: %v", tr.Name, labels, jr, err)
								continue
							}
							compared++
							seen[string(ed)]++
							if jd := judgeDecision(jv); jd != ed {
								disagreements++
								t.Errorf("%s: workload %v, %s from %s (client %s):\n  judge: %s (%s)\n  istio: %s (%s)", tr.Name, labels, jr, peer.Principal, peer.RemoteIP, jd, jv.Reason, ed, why)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("compared %d requests, the judge declined %d, %d disagreements; Envoy's answers: %v", compared, declined, disagreements, seen)
	for _, d := range []envoy.Decision{envoy.Allowed, envoy.Unauthenticated, envoy.Denied, envoy.ToAuthorizer} {
		if seen[string(d)] < 1000 {
			t.Errorf("only %d requests compared were %s, want at least 1000: the comparison proves too little", seen[string(d)], d)
		}
	}
}
