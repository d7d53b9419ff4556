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
	typeapi "istio.io/api/type/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

// TestSidecarAppliesTheCustomPoliciesSelectingItsPods serves a backend
// behind the sidecar stand-in, with policies and the mesh config in a fake
// API: only CUSTOM policies of its namespace (or Istio's root namespace)
// whose selector its labels match send a request to the provider.
func TestSidecarAppliesTheCustomPoliciesSelectingItsPods(t *testing.T) {
	var checks []string
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks = append(checks, r.URL.Path)
		if r.Header.Get("Cookie") == "session=ok" {
			w.Header().Set("X-Auth-Request-User", "jane")
			return
		}
		w.Header().Set("Location", "http://idp/login")
		w.WriteHeader(http.StatusFound)
	}))
	defer provider.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(provider.URL, "http://"))
	mesh := "extensionProviders:\n- name: login\n  envoyExtAuthzHttp:\n    service: login.auth.svc.cluster.local\n    port: " + port +
		"\n    includeRequestHeadersInCheck: [cookie]\n    headersToUpstreamOnAllow: [x-auth-request-user]\n    headersToDownstreamOnDeny: [location]\n"
	custom := func(ns, name string, selector map[string]string, action securityapi.AuthorizationPolicy_Action, paths ...string) *securityv1.AuthorizationPolicy {
		ap := &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		ap.Spec.Action = action
		if selector != nil {
			ap.Spec.Selector = &typeapi.WorkloadSelector{MatchLabels: selector}
		}
		ap.Spec.ActionDetail = &securityapi.AuthorizationPolicy_Provider{Provider: &securityapi.AuthorizationPolicy_ExtensionProvider{Name: "login"}}
		ap.Spec.Rules = []*securityapi.Rule{{To: []*securityapi.Rule_To{{Operation: &securityapi.Operation{Paths: paths}}}}}
		return ap
	}
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = securityv1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio"}, Data: map[string]string{"mesh": mesh}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "auth", Name: "login"}, Spec: corev1.ServiceSpec{ClusterIP: host}},
		custom("shop", "mine", map[string]string{"app": "echo"}, securityapi.AuthorizationPolicy_CUSTOM, "/private/*"),
		custom("shop", "other-pods", map[string]string{"app": "other"}, securityapi.AuthorizationPolicy_CUSTOM, "/other/*"),
		custom("elsewhere", "other-namespace", nil, securityapi.AuthorizationPolicy_CUSTOM, "/elsewhere/*"),
		custom("shop", "allow", map[string]string{"app": "echo"}, securityapi.AuthorizationPolicy_ALLOW, "/allowed/*"),
		custom("istio-system", "mesh-wide", nil, securityapi.AuthorizationPolicy_CUSTOM, "/mesh/*"),
	).Build()
	sc := &sidecar{client: c, w: workload{namespace: "shop", labels: map[string]string{"app": "echo", "v": "1"}, root: "istio-system"},
		mesh: "istio-system/istio", http: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	backend := httptest.NewServer(sc.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "backend saw user "+r.Header.Get("X-Auth-Request-User"))
	})))
	defer backend.Close()

	cases := []struct {
		path, cookie, user string
		status             int
		checked            bool
	}{
		{"/private/a", "", "", http.StatusFound, true},
		{"/private/a", "session=ok", "jane", http.StatusOK, true},
		{"/mesh/a", "", "", http.StatusFound, true},
		{"/other/a", "", "forged", http.StatusOK, false},
		{"/elsewhere/a", "", "forged", http.StatusOK, false},
		{"/allowed/a", "", "forged", http.StatusOK, false},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range cases {
		checks = nil
		req, _ := http.NewRequest(http.MethodGet, backend.URL+tc.path, nil)
		req.Header.Set("X-Auth-Request-User", "forged")
		if tc.cookie != "" {
			req.Header.Set("Cookie", tc.cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status || (len(checks) > 0) != tc.checked {
			t.Errorf("%s (cookie %q): %d, checked %v; want %d, checked %t", tc.path, tc.cookie, resp.StatusCode, checks, tc.status, tc.checked)
		}
		if tc.status == http.StatusOK && string(body) != "backend saw user "+tc.user {
			t.Errorf("%s: %q, want the user %q", tc.path, body, tc.user)
		}
		if tc.status == http.StatusFound && resp.Header.Get("Location") != "http://idp/login" {
			t.Errorf("%s: denial without the provider's Location: %v", tc.path, resp.Header)
		}
	}
}
