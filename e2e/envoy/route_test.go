package envoy

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	uritemplatematchv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/match/uri_template/v3"
	uritemplaterewritev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/rewrite/uri_template/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func typed(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func prefix(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func regex(re string) *matcherv3.RegexMatcher { return &matcherv3.RegexMatcher{Regex: re} }

func templateMatch(t *testing.T, template string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathMatchPolicy{PathMatchPolicy: &corev3.TypedExtensionConfig{
		Name: "envoy.path.match.uri_template.uri_template_matcher", TypedConfig: typed(t, &uritemplatematchv3.UriTemplateMatchConfig{PathTemplate: template})}}}
}

// TestVirtualHostSelection: Envoy's order of domains — exact, longest
// suffix wildcard, longest prefix wildcard, "*".
func TestVirtualHostSelection(t *testing.T) {
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
		{Name: "any", Domains: []string{"*"}},
		{Name: "suffix", Domains: []string{"*.example.com"}},
		{Name: "longer-suffix", Domains: []string{"*.shop.example.com"}},
		{Name: "prefix", Domains: []string{"orders.*"}},
		{Name: "exact", Domains: []string{"orders.example.com", "orders.example.com:8080"}},
	}}
	cases := map[string]string{
		"orders.example.com":      "exact",
		"ORDERS.example.com":      "exact",
		"orders.example.com:8080": "exact",
		"orders.example.com:9090": "prefix", // the port is part of the host: no suffix covers it
		"a.shop.example.com":      "longer-suffix",
		"shop.example.com":        "suffix",
		"orders.example.org":      "prefix",
		"example.com":             "any",
	}
	for host, want := range cases {
		if got := VirtualHost(rc, host).GetName(); got != want {
			t.Errorf("%s: got %q, want %q", host, got, want)
		}
	}
	if vh := VirtualHost(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Domains: []string{"a.example.com"}}}}, "b.example.com"); vh != nil {
		t.Errorf("a host no domain covers got %v", vh)
	}
}

// TestRouteMatching pins the reading of Envoy's route matching
// (route_components.proto).
func TestRouteMatching(t *testing.T) {
	cases := map[string]struct {
		match *routev3.RouteMatch
		req   Request
		want  bool
	}{
		"a prefix matches what starts with it":                    {prefix("/api/"), Request{Path: "/api/x"}, true},
		"a prefix does not match its path without the slash":      {prefix("/api/"), Request{Path: "/api"}, false},
		"a path-separated prefix matches the path itself":         {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, Request{Path: "/api"}, true},
		"a path-separated prefix matches below a slash":           {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, Request{Path: "/api/x"}, true},
		"a path-separated prefix does not match a longer segment": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/api"}}, Request{Path: "/apix"}, false},
		"paths are case-sensitive by default":                     {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/api"}}, Request{Path: "/API"}, false},
		"case_sensitive false folds case":                         {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/api"}, CaseSensitive: wrapperspb.Bool(false)}, Request{Path: "/API"}, true},
		"a regex must match the whole path":                       {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: regex("/api/[^/]+")}}, Request{Path: "/api/x/y"}, false},
		"a regex matches a whole path":                            {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: regex("/api/[^/]+")}}, Request{Path: "/api/x"}, true},
		"a method matcher reads :method": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: ":method",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regex("GET|POST")}}}}}}, Request{Path: "/", Method: "PUT"}, false},
		"an inverted present match asks for absence": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: "x-beta",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}, InvertMatch: true}}}, Request{Path: "/", Headers: map[string]string{"X-Beta": "1"}}, false},
		"a header's name is read regardless of case": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: "x-admin",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "y"}}}}}}, Request{Path: "/", Headers: map[string]string{"X-Admin": "yes"}}, true},
		"a missing header matches no string": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: "x-admin",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regex(".*")}}}}}}, Request{Path: "/"}, false},
		"a query parameter's first value is matched": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{{Name: "debug",
			QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "1"}}}}}}, Request{Path: "/", Query: "debug=0&debug=1"}, false},
		"a present query parameter": {&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{{Name: "debug",
			QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}}}}, Request{Path: "/", Query: "debug="}, true},
		"a uri template's * is one segment":             {templateMatch(t, "/orders/*/items"), Request{Path: "/orders/7/items"}, true},
		"a uri template's * is not two segments":        {templateMatch(t, "/orders/*/items"), Request{Path: "/orders/7/8/items"}, false},
		"a uri template's ** is the rest":               {templateMatch(t, "/orders/**"), Request{Path: "/orders/7/8"}, true},
		"a uri template's ** needs the slash before it": {templateMatch(t, "/orders/**"), Request{Path: "/orders"}, false},
		"a uri template's variable binds a segment":     {templateMatch(t, "/orders/{id}"), Request{Path: "/orders/7"}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := RouteMatches(c.match, c.req)
			if err != nil || got != c.want {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// TestUnmodelledMatchesAreErrors: what the evaluator does not model is
// never read as a match or a miss.
func TestUnmodelledMatchesAreErrors(t *testing.T) {
	for name, m := range map[string]*routev3.RouteMatch{
		"a runtime fraction":               {PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, RuntimeFraction: &corev3.RuntimeFractionalPercent{}},
		"a connect matcher":                {PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}},
		"a template with ** in the middle": templateMatch(t, "/a/**/b"),
	} {
		if _, err := RouteMatches(m, Request{Path: "/a/x/b"}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRewritePath(t *testing.T) {
	action := func(a *routev3.RouteAction) *routev3.Route_Route { return &routev3.Route_Route{Route: a} }
	rewritePolicy := func(template string) *corev3.TypedExtensionConfig {
		return &corev3.TypedExtensionConfig{Name: "envoy.path.rewrite.uri_template.uri_template_rewriter",
			TypedConfig: typed(t, &uritemplaterewritev3.UriTemplateRewriteConfig{PathTemplateRewrite: template})}
	}
	cases := map[string]struct {
		route      *routev3.Route
		path, want string
	}{
		"a prefix rewrite swaps the matched prefix": {&routev3.Route{Match: prefix("/public/"),
			Action: action(&routev3.RouteAction{PrefixRewrite: "/admin/"})}, "/public/keys", "/admin/keys"},
		"a prefix rewrite of an exact path swaps the whole path": {&routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/status"}},
			Action: action(&routev3.RouteAction{PrefixRewrite: "/health"})}, "/status", "/health"},
		"a path-separated prefix rewrite keeps the rest": {&routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/v1"}},
			Action: action(&routev3.RouteAction{PrefixRewrite: "/v2"})}, "/v1/x", "/v2/x"},
		"a regex rewrite substitutes groups": {&routev3.Route{Match: prefix("/"),
			Action: action(&routev3.RouteAction{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{Pattern: regex("^/v1/(.*)$"), Substitution: `/\1`}})}, "/v1/a/b", "/a/b"},
		"a regex rewrite replaces every match": {&routev3.Route{Match: prefix("/"),
			Action: action(&routev3.RouteAction{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{Pattern: regex("x"), Substitution: "y"}})}, "/x/x", "/y/y"},
		"a uri template rewrite moves variables": {&routev3.Route{Match: templateMatch(t, "/shop/{id}/{rest=**}"),
			Action: action(&routev3.RouteAction{PathRewritePolicy: rewritePolicy("/orders/{id}/details/{rest}")})}, "/shop/7/a/b", "/orders/7/details/a/b"},
		"no rewrite keeps the path": {&routev3.Route{Match: prefix("/"), Action: action(&routev3.RouteAction{})}, "/x", "/x"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := RewritePath(c.route, c.path); err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	bad := &routev3.Route{Match: templateMatch(t, "/shop/{id}"), Action: action(&routev3.RouteAction{PathRewritePolicy: rewritePolicy("/orders/{other}")})}
	if _, err := RewritePath(bad, "/shop/7"); err == nil {
		t.Error("a rewrite naming a variable the match does not bind did not fail")
	}
}

func TestPickClusterFollowsWeights(t *testing.T) {
	rt := &routev3.Route{Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
		Clusters: []*routev3.WeightedCluster_ClusterWeight{
			{Name: "a", Weight: wrapperspb.UInt32(0)},
			{Name: "b", Weight: wrapperspb.UInt32(30)},
			{Name: "c", Weight: wrapperspb.UInt32(70)},
		}}}}}}
	for n, want := range map[int64]string{0: "b", 29: "b", 30: "c", 99: "c"} {
		if got, wc, err := PickCluster(rt, n); err != nil || got != want || wc.GetName() != want {
			t.Errorf("draw %d: got %q, %v; want %q", n, got, err, want)
		}
	}
	seen := map[string]int{}
	for range 2000 {
		c, _, err := PickCluster(rt, -1)
		if err != nil {
			t.Fatal(err)
		}
		seen[c]++
	}
	if seen["a"] != 0 || seen["b"] < 400 || seen["c"] < 1200 {
		t.Errorf("2000 random draws: %v", seen)
	}
	if got := Clusters(rt); got["b"] != 30 || got["c"] != 70 || len(got) != 3 {
		t.Errorf("clusters %v", got)
	}
}
