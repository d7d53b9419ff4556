package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	securityapi "istio.io/api/security/v1beta1"
)

// meshYAML is a mesh config as the docs give it (docs/operations.md).
const meshYAML = `
accessLogFile: /dev/stdout
extensionProviders:
- name: oauth2-proxy
  envoyExtAuthzHttp:
    service: oauth2-proxy.login.svc.cluster.local
    port: 4180
    timeout: 5s
    includeRequestHeadersInCheck: [cookie, "x-forwarded-*"]
    headersToUpstreamOnAllow: [authorization, "x-auth-request-*"]
    headersToDownstreamOnDeny: [content-type, set-cookie, location]
    headersToDownstreamOnAllow: [set-cookie]
- name: api-keys
  envoyExtAuthzGrpc:
    service: api-keys.keys.svc.cluster.local
    port: 9000
`

func TestParseMeshConfigFindsHTTPProviders(t *testing.T) {
	mesh, err := parseMeshConfig(meshYAML)
	if err != nil {
		t.Fatal(err)
	}
	p, err := httpProvider(mesh, "oauth2-proxy")
	if err != nil {
		t.Fatal(err)
	}
	if p.GetPort() != 4180 || p.GetTimeout().AsDuration().Seconds() != 5 || len(p.GetHeadersToUpstreamOnAllow()) != 2 {
		t.Errorf("provider read as %v", p)
	}
	if _, err := httpProvider(mesh, "api-keys"); err == nil || !strings.Contains(err.Error(), "not envoyExtAuthzHttp") {
		t.Errorf("a gRPC provider: %v", err)
	}
	if _, err := httpProvider(mesh, "oauth2"); err == nil {
		t.Error("an undefined provider was found")
	}
}

func TestOperationMatchesAsIstio(t *testing.T) {
	op := &securityapi.Operation{Paths: []string{"/app/*", "/exact", "*.css"}, Methods: []string{"GET", "POST"}, NotPaths: []string{"/app/public/*"}}
	cases := []struct {
		method, target string
		want           bool
	}{
		{"GET", "http://h/app/x?q=1", true},
		{"POST", "http://h/exact", true},
		{"GET", "http://h/exactly", false},
		{"GET", "http://h/site.css", true},
		{"DELETE", "http://h/app/x", false},
		{"GET", "http://h/app/public/logo", false},
		{"GET", "http://h/other", false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.target, nil)
		if got := operationMatches(op, r); got != c.want {
			t.Errorf("%s %s: matched %t, want %t", c.method, c.target, got, c.want)
		}
	}
	hosts := &securityapi.Operation{Hosts: []string{"App.Example.com"}}
	if !operationMatches(hosts, httptest.NewRequest("GET", "http://app.example.COM:8080/", nil)) {
		t.Error("hosts are compared without case and port")
	}
}

func TestPolicyWithFromOrWhenFailsClosed(t *testing.T) {
	spec := &securityapi.AuthorizationPolicy{Rules: []*securityapi.Rule{{
		From: []*securityapi.Rule_From{{Source: &securityapi.Source{Namespaces: []string{"a"}}}},
	}}}
	if _, err := policyMatches(spec, httptest.NewRequest("GET", "/", nil)); err == nil {
		t.Error("a rule with from was evaluated")
	}
	if ok, _ := policyMatches(&securityapi.AuthorizationPolicy{}, httptest.NewRequest("GET", "/", nil)); ok {
		t.Error("a policy without rules matched")
	}
}

// TestCheckAsEnvoy runs the check against a provider that records what it
// was asked and answers as told.
func TestCheckAsEnvoy(t *testing.T) {
	mesh, err := parseMeshConfig(meshYAML)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := httpProvider(mesh, "oauth2-proxy")
	var asked *http.Request
	answer := func(w http.ResponseWriter) {}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r
		answer(w)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	var n uint32
	for _, c := range port {
		n = n*10 + uint32(c-'0')
	}
	p.Port = n

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	newRequest := func() *http.Request {
		r := httptest.NewRequest("POST", "http://app.example.com/orders?id=7", strings.NewReader("body"))
		r.Header.Set("Cookie", "_oauth2_proxy=s")
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("Authorization", "Bearer client")
		r.Header.Set("X-Auth-Request-User", "forged")
		return r
	}

	// A denial: the provider's status, body and the listed headers only.
	answer = func(w http.ResponseWriter) {
		w.Header().Set("Location", "http://idp/authorize")
		w.Header().Set("Set-Cookie", "csrf=1")
		w.Header().Set("X-Internal", "secret")
		w.WriteHeader(http.StatusFound)
		_, _ = io.WriteString(w, "to login")
	}
	v := checkHTTP(context.Background(), client, p, host, newRequest())
	if v.allowed || v.status != http.StatusFound || string(v.body) != "to login" {
		t.Fatalf("denial read as %+v", v)
	}
	if v.downstream.Get("Location") == "" || v.downstream.Get("Set-Cookie") == "" || v.downstream.Get("X-Internal") != "" {
		t.Errorf("denial headers %v", v.downstream)
	}
	if asked.Method != "POST" || asked.URL.RequestURI() != "/orders?id=7" || asked.Host != "app.example.com" || asked.ContentLength != 0 {
		t.Errorf("check request %s %s host %s length %d", asked.Method, asked.URL.RequestURI(), asked.Host, asked.ContentLength)
	}
	if asked.Header.Get("Cookie") == "" || asked.Header.Get("X-Forwarded-Proto") != "https" || asked.Header.Get("Authorization") != "" {
		t.Errorf("check request headers %v: want cookie and x-forwarded-* only", asked.Header)
	}

	// An allow: the listed headers replace the client's.
	answer = func(w http.ResponseWriter) {
		w.Header().Set("X-Auth-Request-User", "jane")
		w.Header().Set("X-Other", "no")
		w.Header().Set("Set-Cookie", "refreshed=1")
	}
	v = checkHTTP(context.Background(), client, p, host, newRequest())
	if !v.allowed || v.upstream.Get("X-Auth-Request-User") != "jane" || v.upstream.Get("X-Other") != "" || v.downstream.Get("Set-Cookie") != "refreshed=1" {
		t.Errorf("allow read as %+v", v)
	}

	// Without headersToDownstreamOnDeny every header but Authorization.
	p.HeadersToDownstreamOnDeny = nil
	answer = func(w http.ResponseWriter) {
		w.Header().Set("Authorization", "Bearer internal")
		w.Header().Set("X-Reason", "no session")
		w.WriteHeader(http.StatusUnauthorized)
	}
	v = checkHTTP(context.Background(), client, p, host, newRequest())
	if v.allowed || v.status != http.StatusUnauthorized || v.downstream.Get("Authorization") != "" || v.downstream.Get("X-Reason") == "" {
		t.Errorf("default denial headers %+v", v)
	}

	// A provider that cannot be reached: statusOnError, or failOpen.
	srv.Close()
	p.StatusOnError = "503"
	if v := checkHTTP(context.Background(), client, p, host, newRequest()); v.allowed || v.status != http.StatusServiceUnavailable {
		t.Errorf("unreachable provider: %+v", v)
	}
	p.FailOpen = true
	if v := checkHTTP(context.Background(), client, p, host, newRequest()); !v.allowed {
		t.Errorf("unreachable provider with failOpen: %+v", v)
	}
}
