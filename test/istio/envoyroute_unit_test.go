package istio

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestEnvoyRouteMatching pins the reading of Envoy's route matching the
// comparison with the judge rests on (Envoy's route_components.proto).
func TestEnvoyRouteMatching(t *testing.T) {
	regex := func(re string) *matcherv3.RegexMatcher { return &matcherv3.RegexMatcher{Regex: re} }
	cases := map[string]struct {
		match *routev3.RouteMatch
		req   envoyRequest
		want  bool
	}{
		"a prefix matches what starts with it":                    {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/api/"}}, envoyRequest{Path: "/api/x"}, true},
		"a prefix does not match its path without the slash":      {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/api/"}}, envoyRequest{Path: "/api"}, false},
		"a path-separated prefix matches the path itself":         {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, envoyRequest{Path: "/api"}, true},
		"a path-separated prefix matches below a slash":           {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, envoyRequest{Path: "/api/x"}, true},
		"a path-separated prefix does not match a longer segment": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, envoyRequest{Path: "/apix"}, false},
		"paths are case-sensitive by default":                     {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/api"}}, envoyRequest{Path: "/API"}, false},
		"case_sensitive false folds case":                         {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/api"}, CaseSensitive: wrapperspb.Bool(false)}, envoyRequest{Path: "/API"}, true},
		"a regex must match the whole path":                       {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: regex("/api/[^/]+")}}, envoyRequest{Path: "/api/x/y"}, false},
		"a method matcher reads :method": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: ":method",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regex("GET|POST")}}}}}}, envoyRequest{Path: "/", Method: "PUT"}, false},
		"an inverted present match asks for absence": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: "x-beta",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}, InvertMatch: true}}}, envoyRequest{Path: "/", Headers: map[string]string{"X-Beta": "1"}}, false},
		"a query parameter's first value is matched": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{{Name: "debug",
			QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "1"}}}}}}, envoyRequest{Path: "/", Query: "debug=0&debug=1"}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := envoyRouteMatches(c.match, c.req)
			if err != nil || got != c.want {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestEnvoyRewrite(t *testing.T) {
	action := func(a *routev3.RouteAction) *routev3.Route_Route { return &routev3.Route_Route{Route: a} }
	cases := map[string]struct {
		route      *routev3.Route
		path, want string
	}{
		"a prefix rewrite swaps the matched prefix": {&routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/public/"}},
			Action: action(&routev3.RouteAction{PrefixRewrite: "/admin/"})}, "/public/keys", "/admin/keys"},
		"a prefix rewrite of an exact path swaps the whole path": {&routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/status"}},
			Action: action(&routev3.RouteAction{PrefixRewrite: "/health"})}, "/status", "/health"},
		"a regex rewrite substitutes groups": {&routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: action(&routev3.RouteAction{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^/v1/(.*)$"}, Substitution: `/\1`}})}, "/v1/a/b", "/a/b"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := envoyRewrite(c.route, c.path); err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestAgreeTellsVerdictsApart: the comparison notices each field.
func TestAgreeTellsVerdictsApart(t *testing.T) {
	base := gatewayVerdict{Route: "shop.orders.1", Clusters: []string{"outbound|8080||orders.shop.svc.cluster.local"}, Path: "/x", Headers: []string{"request-remove x-debug"}}
	if !agree(&base, &base) {
		t.Fatal("a verdict disagrees with itself")
	}
	named := base
	named.Route = "shop.orders.1.m0"
	if !agree(&base, &named) {
		t.Fatal("Envoy's name of a named match is its route's")
	}
	for name, change := range map[string]func(*gatewayVerdict){
		"route": func(v *gatewayVerdict) { v.Route = "shop.orders.2" },
		"clusters": func(v *gatewayVerdict) {
			v.Clusters = append([]string{"outbound|9000||reports.analytics.svc.cluster.local"}, v.Clusters...)
		},
		"path":    func(v *gatewayVerdict) { v.Path = "/y" },
		"headers": func(v *gatewayVerdict) { v.Headers = nil },
	} {
		other := base
		change(&other)
		if agree(&base, &other) {
			t.Errorf("a different %s agrees", name)
		}
	}
	if agree(&base, nil) || agree(nil, &base) || !agree(nil, nil) {
		t.Error("a route and no route agree, or no route and no route do not")
	}
}
