package istio

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	meshconfig "istio.io/api/mesh/v1alpha1"
	networkingapi "istio.io/api/networking/v1alpha3"
	securityapi "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	authzmodel "istio.io/istio/pilot/pkg/security/authz/model"
	"istio.io/istio/pilot/pkg/xds/filters"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/schema/gvk"

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

// sidecarDecision is what a sidecar does with a request.
type sidecarDecision string

const (
	decisionAllowed         sidecarDecision = "allowed"
	decisionUnauthenticated sidecarDecision = "rejected (401)"
	decisionDenied          sidecarDecision = "denied (403)"
	decisionAuthorizer      sidecarDecision = "sent to the external authorizer"
)

// envoyDecision runs the request through the sidecar's filters: jwt_authn
// (a token read but not valid is a 401; a valid one's claims become the
// metadata RBAC reads), then each RBAC filter in order (the shadow rules
// of CUSTOM hand a matching request to its authorizer; DENY denies a
// match; ALLOW denies what no policy matches).
func envoyDecision(fs []*hcmv3.HttpFilter, r sidecarRequest, token *judge.Token) (sidecarDecision, string, error) {
	for _, f := range fs {
		switch f.GetName() {
		case filters.EnvoyJwtFilterName:
			cfg := &jwtauthnv3.JwtAuthentication{}
			if err := f.GetTypedConfig().UnmarshalTo(cfg); err != nil {
				return "", "", err
			}
			payload, ok, err := jwtAuthenticate(cfg, token)
			if err != nil {
				return "", "", err
			}
			if !ok {
				return decisionUnauthenticated, "jwt_authn rejects the token", nil
			}
			if payload != nil {
				r.Metadata = map[string]map[string]any{filters.EnvoyJwtFilterName: {filters.EnvoyJwtFilterPayload: payload}}
			}
		case "envoy.filters.http.rbac":
			cfg := &rbacfilterv3.RBAC{}
			if err := f.GetTypedConfig().UnmarshalTo(cfg); err != nil {
				return "", "", err
			}
			if cfg.GetRules() == nil {
				if cfg.GetShadowRulesStatPrefix() != authzmodel.RBACExtAuthzShadowRulesStatPrefix {
					continue
				}
				matched, err := rbacMatches(cfg.GetShadowRules(), r)
				if err != nil || matched != "" {
					return decisionAuthorizer, "CUSTOM shadow policy " + matched, err
				}
				continue
			}
			matched, err := rbacMatches(cfg.GetRules(), r)
			if err != nil {
				return "", "", err
			}
			switch action := cfg.GetRules().GetAction().String(); {
			case action == "DENY" && matched != "":
				return decisionDenied, "DENY policy " + matched, nil
			case action == "ALLOW" && matched == "":
				return decisionDenied, "no ALLOW policy matches", nil
			}
		}
	}
	return decisionAllowed, "", nil
}

// tokenPlace is where a token is carried, as a jwt_authn location.
func tokenPlace(tok *judge.Token) judge.Place {
	if tok.In == (judge.Place{}) {
		return judge.InHeader("authorization", "Bearer ")
	}
	return tok.In
}

// reads reports whether a provider extracts a token from where it is
// carried: its headers (names regardless of case, with the prefix) and
// parameters, else Envoy's defaults (Authorization "Bearer ", access_token).
func reads(p *jwtauthnv3.JwtProvider, at judge.Place) bool {
	if len(p.GetFromHeaders()) == 0 && len(p.GetFromParams()) == 0 && len(p.GetFromCookies()) == 0 {
		return at == judge.InHeader("authorization", "Bearer ") || at == judge.InParam("access_token")
	}
	for _, h := range p.GetFromHeaders() {
		if at.Param == "" && strings.EqualFold(h.GetName(), at.Header) && h.GetValuePrefix() == at.Prefix {
			return true
		}
	}
	return at.Param != "" && slices.Contains(p.GetFromParams(), at.Param)
}

// verifies reports whether a provider verifies the token: its issuer, its
// key set (the remote JWKS's URI) and, if it names audiences, one of them.
func verifies(p *jwtauthnv3.JwtProvider, tok *judge.Token) bool {
	if p.GetIssuer() != "" && p.GetIssuer() != tok.Issuer {
		return false
	}
	if p.GetRemoteJwks().GetHttpUri().GetUri() != tok.KeySet {
		return false
	}
	return len(p.GetAudiences()) == 0 || slices.ContainsFunc(tok.Audiences, func(a string) bool { return slices.Contains(p.GetAudiences(), a) })
}

// jwtAuthenticate evaluates the filter's requirement for the request's
// token: a provider requirement holds if that provider reads and verifies
// the token, allow_missing if no provider reads it or one verifies it. It
// returns the verified token's payload (nil without one) and whether the
// request passes.
func jwtAuthenticate(cfg *jwtauthnv3.JwtAuthentication, tok *judge.Token) (map[string]any, bool, error) {
	if len(cfg.GetRules()) != 1 || cfg.GetRules()[0].GetMatch().GetPrefix() != "/" || cfg.GetRules()[0].GetRequires() == nil {
		return nil, false, fmt.Errorf("jwt_authn rules other than one requirement for every path are not modelled")
	}
	var readers []*jwtauthnv3.JwtProvider
	valid := false
	if tok != nil {
		for _, name := range slices.Sorted(maps.Keys(cfg.GetProviders())) {
			if p := cfg.GetProviders()[name]; reads(p, tokenPlace(tok)) {
				readers = append(readers, p)
				valid = valid || verifies(p, tok)
			}
		}
	}
	var eval func(req *jwtauthnv3.JwtRequirement) (bool, error)
	eval = func(req *jwtauthnv3.JwtRequirement) (bool, error) {
		switch rt := req.GetRequiresType().(type) {
		case *jwtauthnv3.JwtRequirement_ProviderName:
			p := cfg.GetProviders()[rt.ProviderName]
			return p != nil && tok != nil && reads(p, tokenPlace(tok)) && verifies(p, tok), nil
		case *jwtauthnv3.JwtRequirement_AllowMissing:
			return len(readers) == 0 || valid, nil
		case *jwtauthnv3.JwtRequirement_RequiresAny:
			return anyTrue(rt.RequiresAny.GetRequirements(), eval)
		case *jwtauthnv3.JwtRequirement_RequiresAll:
			return allTrue(rt.RequiresAll.GetRequirements(), eval)
		}
		return false, fmt.Errorf("jwt requirement %v is not modelled", req)
	}
	ok, err := eval(cfg.GetRules()[0].GetRequires())
	if err != nil || !ok || !valid {
		return nil, ok, err
	}
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
	return payload, true, nil
}

func judgeDecision(v judge.Verdict) sidecarDecision {
	switch {
	case v.Decision == judge.Allowed:
		return decisionAllowed
	case v.Decision == judge.Unauthenticated:
		return decisionUnauthenticated
	case strings.HasPrefix(v.Reason, "CUSTOM"):
		return decisionAuthorizer
	}
	return decisionDenied
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
							sr := sidecarRequest{envoyRequest: envoyRequest{Host: "orders.example.com", Path: path, Method: method}, Port: 8080,
								Principal: "spiffe://" + peer.Principal, DirectIP: peer.IP, RemoteIP: peer.RemoteIP}
							ed, why, err := envoyDecision(fs, sr, tok)
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
	for _, d := range []sidecarDecision{decisionAllowed, decisionUnauthenticated, decisionDenied, decisionAuthorizer} {
		if seen[string(d)] < 1000 {
			t.Errorf("only %d requests compared were %s, want at least 1000: the comparison proves too little", seen[string(d)], d)
		}
	}
}
