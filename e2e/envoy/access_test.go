package envoy

import (
	"errors"
	"net/netip"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	rbacfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func pathPerm(p string) *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: exact(p)}}}}
}

func principal(name string) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: exact(name)}}}
}

func claimPrincipal(claim, value string) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{ //nolint:staticcheck // what Istio writes
		Filter: FilterJWTAuthn, Path: []*matcherv3.MetadataMatcher_PathSegment{
			{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "payload"}}, {Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: claim}}},
		Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{MatchPattern: &matcherv3.ListMatcher_OneOf{
			OneOf: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: exact(value)}}}}}},
	}}}
}

func TestMatchingPolicy(t *testing.T) {
	gateway := "spiffe://cluster.local/ns/istio-system/sa/gateway"
	rules := &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{
		"b-admin": {Permissions: []*rbacv3.Permission{pathPerm("/admin")}, Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{
			Ids: []*rbacv3.Principal{principal(gateway), claimPrincipal("scope", "admin")}}}}}},
		"a-office": {Permissions: []*rbacv3.Permission{{Rule: &rbacv3.Permission_NotRule{NotRule: pathPerm("/admin")}}},
			Principals: []*rbacv3.Principal{{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: &corev3.CidrRange{AddressPrefix: "198.51.100.0", PrefixLen: wrapperspb.UInt32(24)}}}}},
	}}
	office, elsewhere := netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr("203.0.113.1")
	admin := Metadata{FilterJWTAuthn: {"payload": map[string]any{"scope": []any{"read", "admin"}}}}
	cases := map[string]struct {
		req  AccessRequest
		want string
	}{
		"an office client on a public path": {AccessRequest{Request: Request{Path: "/x"}, Downstream: Downstream{RemoteIP: office}}, "a-office"},
		"another client on a public path":   {AccessRequest{Request: Request{Path: "/x"}, Downstream: Downstream{RemoteIP: elsewhere}}, ""},
		"the gateway with an admin token":   {AccessRequest{Request: Request{Path: "/admin"}, Downstream: Downstream{Principal: gateway}, Metadata: admin}, "b-admin"},
		"the gateway without the scope":     {AccessRequest{Request: Request{Path: "/admin"}, Downstream: Downstream{Principal: gateway}}, ""},
		"another peer with an admin token":  {AccessRequest{Request: Request{Path: "/admin"}, Downstream: Downstream{Principal: "spiffe://cluster.local/ns/x/sa/y"}, Metadata: admin}, ""},
	}
	for name, c := range cases {
		if got, err := MatchingPolicy(rules, c.req); err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, c.want)
		}
	}
}

func TestTokenOf(t *testing.T) {
	custom := &jwtauthnv3.JwtProvider{FromHeaders: []*jwtauthnv3.JwtHeader{{Name: "x-jwt", ValuePrefix: "Bearer "}}, FromParams: []string{"token"}, FromCookies: []string{"session"}}
	cases := map[string]struct {
		p     *jwtauthnv3.JwtProvider
		req   Request
		token string
	}{
		"default: Authorization after Bearer": {&jwtauthnv3.JwtProvider{}, Request{Headers: map[string]string{"Authorization": "Bearer a.b.c"}}, "a.b.c"},
		"default: access_token":               {&jwtauthnv3.JwtProvider{}, Request{Query: "access_token=a.b.c"}, "a.b.c"},
		"default: no other header":            {&jwtauthnv3.JwtProvider{}, Request{Headers: map[string]string{"x-jwt": "Bearer a.b.c"}}, ""},
		"custom header":                       {custom, Request{Headers: map[string]string{"X-JWT": "Bearer a.b.c, other"}}, "a.b.c"},
		"custom header without its prefix":    {custom, Request{Headers: map[string]string{"x-jwt": "a.b.c"}}, ""},
		"custom parameter":                    {custom, Request{Query: "token=a.b.c"}, "a.b.c"},
		"custom cookie":                       {custom, Request{Headers: map[string]string{"cookie": "x=1; session=a.b.c"}}, "a.b.c"},
		"custom: not Authorization":           {custom, Request{Headers: map[string]string{"authorization": "Bearer a.b.c"}}, ""},
		"no prefix: the whole value":          {&jwtauthnv3.JwtProvider{FromHeaders: []*jwtauthnv3.JwtHeader{{Name: "authorization"}}}, Request{Headers: map[string]string{"authorization": "Bearer a.b.c"}}, "Bearer a.b.c"},
	}
	for name, c := range cases {
		got, ok := TokenOf(c.p, c.req)
		if got != c.token || ok != (c.token != "") {
			t.Errorf("%s: got %q, %v; want %q", name, got, ok, c.token)
		}
	}
}

// verifyOnly verifies exactly the token "good" for the provider "idp".
func verifyOnly(provider string, _ *jwtauthnv3.JwtProvider, token string) (map[string]any, error) {
	if provider == "idp" && token == "good" {
		return map[string]any{"sub": "alice"}, nil
	}
	return nil, errors.New("bad signature")
}

func filter(t *testing.T, name string, cfg proto.Message) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: typed(t, cfg)}}
}

// TestEvaluateInboundChain: Istio's inbound order — the CUSTOM shadow
// rules and ext_authz, jwt_authn, DENY, ALLOW — with each filter deciding.
func TestEvaluateInboundChain(t *testing.T) {
	anyone := []*rbacv3.Principal{{Identifier: &rbacv3.Principal_Any{Any: true}}}
	jwt := &jwtauthnv3.JwtAuthentication{
		Providers: map[string]*jwtauthnv3.JwtProvider{"idp": {PayloadInMetadata: "payload"}},
		Rules: []*jwtauthnv3.RequirementRule{{Match: prefix("/"), RequirementType: &jwtauthnv3.RequirementRule_Requires{Requires: &jwtauthnv3.JwtRequirement{
			RequiresType: &jwtauthnv3.JwtRequirement_RequiresAny{RequiresAny: &jwtauthnv3.JwtRequirementOrList{Requirements: []*jwtauthnv3.JwtRequirement{
				{RequiresType: &jwtauthnv3.JwtRequirement_ProviderName{ProviderName: "idp"}},
				{RequiresType: &jwtauthnv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}},
			}}}}}}},
	}
	subject := &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{ //nolint:staticcheck // what Istio writes
		Filter: FilterJWTAuthn, Path: []*matcherv3.MetadataMatcher_PathSegment{
			{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "payload"}}, {Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "sub"}}},
		Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: exact("alice")}}}}}
	chain := []*hcmv3.HttpFilter{
		filter(t, FilterRBAC, &rbacfilterv3.RBAC{ShadowRulesStatPrefix: "istio_ext_authz_", ShadowRules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY,
			Policies: map[string]*rbacv3.Policy{"istio-ext-authz-custom": {Permissions: []*rbacv3.Permission{pathPerm("/login")}, Principals: anyone}}}}),
		filter(t, FilterExtAuthz, &extauthzv3.ExtAuthz{FilterEnabledMetadata: &matcherv3.MetadataMatcher{Filter: FilterRBAC,
			Path:  []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "istio_ext_authz_shadow_effective_policy_id"}}},
			Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "istio-ext-authz"}}}}}}),
		filter(t, FilterJWTAuthn, jwt),
		filter(t, FilterRBAC, &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_DENY,
			Policies: map[string]*rbacv3.Policy{"deny-debug": {Permissions: []*rbacv3.Permission{pathPerm("/debug")}, Principals: anyone}}}}),
		filter(t, FilterRBAC, &rbacfilterv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
			"public":  {Permissions: []*rbacv3.Permission{pathPerm("/public"), pathPerm("/login")}, Principals: anyone},
			"private": {Permissions: []*rbacv3.Permission{pathPerm("/private")}, Principals: []*rbacv3.Principal{subject}},
		}}}),
		{Name: "envoy.filters.http.router"},
	}
	bearer := func(tok string) map[string]string { return map[string]string{"authorization": "Bearer " + tok} }
	cases := map[string]struct {
		req     Request
		allow   bool // what the authorizer says
		want    Decision
		askedAZ bool
	}{
		"public, no token":                              {Request{Path: "/public"}, false, Allowed, false},
		"public, a bad token":                           {Request{Path: "/public", Headers: bearer("bad")}, false, Unauthenticated, false},
		"private, a verified token":                     {Request{Path: "/private", Headers: bearer("good")}, false, Allowed, false},
		"private, no token":                             {Request{Path: "/private"}, false, Denied, false},
		"denied path, a verified token":                 {Request{Path: "/debug", Headers: bearer("good")}, false, Denied, false},
		"unlisted path":                                 {Request{Path: "/other"}, false, Denied, false},
		"custom path, the authorizer no":                {Request{Path: "/login"}, false, DeniedByAuthorizer, true},
		"custom path, the authorizer ok":                {Request{Path: "/login"}, true, Allowed, true},
		"custom path asked before the token is checked": {Request{Path: "/login", Headers: bearer("bad")}, false, DeniedByAuthorizer, true},
	}
	for name, c := range cases {
		asked := false
		authorize := func(*extauthzv3.ExtAuthz) (bool, error) { asked = true; return c.allow, nil }
		out, err := Evaluate(chain, AccessRequest{Request: c.req}, verifyOnly, authorize)
		if err != nil || out.Decision != c.want || asked != c.askedAZ {
			t.Errorf("%s: %s (%s: %s), asked the authorizer %v, %v; want %s, asked %v", name, out.Decision, out.Filter, out.Reason, asked, err, c.want, c.askedAZ)
		}
	}
	if out, err := Evaluate(chain, AccessRequest{Request: Request{Path: "/login"}}, verifyOnly, nil); err != nil || out.Decision != ToAuthorizer {
		t.Errorf("without an Authorizer: %v, %v", out.Decision, err)
	}
}
