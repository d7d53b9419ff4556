package envoy

import (
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func hv(name, value string, action corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}, AppendAction: action}
}

func TestHeaderMutations(t *testing.T) {
	rc := &routev3.RouteConfiguration{RequestHeadersToAdd: []*corev3.HeaderValueOption{hv("x-level", "config", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)}}
	vh := &routev3.VirtualHost{RequestHeadersToRemove: []string{"x-debug"}}
	rt := &routev3.Route{
		RequestHeadersToAdd: []*corev3.HeaderValueOption{
			hv("x-level", "route", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			hv("x-forwarded-for", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			hv("x-tag", "a", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
			hv("x-once", "new", corev3.HeaderValueOption_ADD_IF_ABSENT),
			hv("x-only-if", "new", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS),
			hv("x-empty", "", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			{Header: &corev3.HeaderValue{Key: "x-legacy", Value: "v"}, Append: wrapperspb.Bool(false)},
		},
		RequestHeadersToRemove: []string{"x-level"},
	}
	h := http.Header{"X-Debug": {"1"}, "X-Forwarded-For": {"6.6.6.6"}, "X-Tag": {"z"}, "X-Once": {"old"}, "X-Legacy": {"a", "b"}}
	vars := map[string]string{"%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%": "10.0.0.7"}
	if err := Apply(h, RequestMutations(rc, vh, rt, nil), vars); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"X-Level":         {"config"}, // the less specific level wins
		"X-Forwarded-For": {"10.0.0.7"}, "X-Tag": {"z", "a"}, "X-Once": {"old"}, "X-Legacy": {"v"},
	}
	for name, values := range want {
		if got := h.Values(name); len(got) != len(values) || got[0] != values[0] || got[len(got)-1] != values[len(values)-1] {
			t.Errorf("%s: %v, want %v", name, got, values)
		}
	}
	for _, gone := range []string{"X-Debug", "X-Only-If", "X-Empty"} {
		if _, ok := h[gone]; ok {
			t.Errorf("%s is still there: %v", gone, h[gone])
		}
	}
	rc.MostSpecificHeaderMutationsWins = true
	h = http.Header{}
	if err := Apply(h, RequestMutations(rc, vh, rt, nil), vars); err != nil || h.Get("X-Level") != "route" {
		t.Errorf("most specific wins: %v, %v", h.Get("X-Level"), err)
	}
}

func TestFormatRefusesUnknownCommands(t *testing.T) {
	if got, err := Format("100%% %A% b", map[string]string{"%A%": "a"}); err != nil || got != "100% a b" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := Format("%REQ(x-user)%", nil); err == nil {
		t.Error("an unknown command operator was formatted")
	}
}

func TestRedirect(t *testing.T) {
	cases := map[string]struct {
		redirect *routev3.RedirectAction
		scheme   string
		req      Request
		status   int
		location string
	}{
		"https redirect keeps host and path": {&routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}},
			"http", Request{Host: "shop.example.com:8080", Path: "/a", Query: "b=1"}, 301, "https://shop.example.com/a?b=1"},
		"path redirect with a code": {&routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new"}, ResponseCode: routev3.RedirectAction_FOUND},
			"https", Request{Host: "shop.example.com", Path: "/old"}, 302, "https://shop.example.com/new"},
		"host, port and stripped query": {&routev3.RedirectAction{HostRedirect: "other.example.com", PortRedirect: 8443, StripQuery: true},
			"https", Request{Host: "shop.example.com", Path: "/x", Query: "q=1"}, 301, "https://other.example.com:8443/x"},
		"prefix rewrite": {&routev3.RedirectAction{PathRewriteSpecifier: &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/v2/"}, ResponseCode: routev3.RedirectAction_PERMANENT_REDIRECT},
			"http", Request{Host: "shop.example.com", Path: "/v1/x"}, 308, "http://shop.example.com/v2/x"},
	}
	for name, c := range cases {
		rt := &routev3.Route{Match: prefix("/v1/"), Action: &routev3.Route_Redirect{Redirect: c.redirect}}
		status, location, err := Redirect(rt, c.scheme, c.req)
		if err != nil || status != c.status || location != c.location {
			t.Errorf("%s: %d %s %v; want %d %s", name, status, location, err, c.status, c.location)
		}
	}
}
