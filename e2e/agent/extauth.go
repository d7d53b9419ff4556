package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	securityapi "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The backend's sidecar stand-in: with --workload-namespace and
// --workload-labels a backend applies, before it answers, the CUSTOM
// AuthorizationPolicies that select its pods (those of its namespace, and
// of Istio's root namespace, whose selector its labels match or that have
// none), as the Envoy of an Istio sidecar does with its ext_authz filter:
//
//   - the policies are re-read on every request; a request that a rule of
//     one of them matches (to.operation hosts, paths, methods and their
//     not-forms, with Istio's exact, "prefix*", "*suffix" and "*" forms) is
//     checked by the policy's provider; a rule with from or when, which the
//     stand-in does not evaluate, fails closed (403);
//   - the provider is read from the mesh config the way istiod holds it:
//     the ConfigMap --mesh-config (istio-system/istio), key "mesh", YAML of
//     MeshConfig, its extensionProviders by name; a name it does not define
//     denies (403), as Istio's RBAC filter does for an unknown provider;
//   - envoyExtAuthzHttp: the check is an HTTP request to the provider's
//     service (a Kubernetes Service, resolved through the API) and port,
//     with the original method, pathPrefix + the original path and query,
//     the original Host, Content-Length 0 and no body, the client headers
//     includeRequestHeadersInCheck names (exact, "prefix*", "*suffix",
//     compared case-insensitively as Envoy's lower-case names are) and the
//     includeAdditionalHeadersInCheck; a 200 allows: the answer's headers
//     that headersToUpstreamOnAllow names replace the request's, those of
//     headersToDownstreamOnAllow are added to the response; any other
//     status denies with the provider's status, body and the headers
//     headersToDownstreamOnDeny names (all but Authorization when it names
//     none); a failed call (or a timeout, default 600s) denies with
//     statusOnError (403), or lets the request pass with failOpen.
//
// Not imitated: envoyExtAuthzGrpc, request bodies in the check, the ALLOW
// and DENY policies (the stand-in admits what the CUSTOM check admits), and
// the path normalization Envoy applies before matching.

const headerContentLength = "Content-Length"

// sidecar applies the CUSTOM AuthorizationPolicies selecting w.
type sidecar struct {
	client client.Client
	w      workload
	// mesh is the namespace/name of the ConfigMap holding the mesh config.
	mesh string
	http *http.Client
}

// wrap runs next behind the sidecar's checks.
func (s *sidecar) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		provider, err := s.providerFor(ctx, r)
		if err != nil {
			log.Printf("ext_authz %s %s: %v (denied)", r.Method, r.URL.Path, err)
			http.Error(w, "RBAC: access denied", http.StatusForbidden)
			return
		}
		if provider == nil {
			next.ServeHTTP(w, r)
			return
		}
		addr, err := s.serviceAddress(ctx, provider.GetService())
		if err != nil {
			log.Printf("ext_authz %s %s: %v", r.Method, r.URL.Path, err)
		}
		v := checkHTTP(ctx, s.http, provider, addr, r)
		if !v.allowed {
			log.Printf("ext_authz %s %s: denied %d", r.Method, r.URL.Path, v.status)
			for k, vs := range v.downstream {
				w.Header()[k] = vs
			}
			w.WriteHeader(v.status)
			_, _ = w.Write(v.body)
			return
		}
		log.Printf("ext_authz %s %s: allowed", r.Method, r.URL.Path)
		for k, vs := range v.upstream {
			r.Header[k] = vs
		}
		for k, vs := range v.downstream {
			w.Header()[k] = append(w.Header()[k], vs...)
		}
		next.ServeHTTP(w, r)
	})
}

// providerFor is the envoyExtAuthzHttp provider whose CUSTOM policy
// matches r, nil when none does.
func (s *sidecar) providerFor(ctx context.Context, r *http.Request) (*meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider, error) {
	var list securityv1.AuthorizationPolicyList
	if err := s.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list AuthorizationPolicies: %w", err)
	}
	name := ""
	for _, ap := range list.Items {
		if ap.Namespace != s.w.namespace && ap.Namespace != s.w.root {
			continue
		}
		if ap.Spec.GetAction() != securityapi.AuthorizationPolicy_CUSTOM || !selects(ap.Spec.GetSelector().GetMatchLabels(), s.w.labels) {
			continue
		}
		matched, err := policyMatches(&ap.Spec, r)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", ap.Namespace, ap.Name, err)
		}
		if matched {
			name = ap.Spec.GetProvider().GetName()
			break
		}
	}
	if name == "" {
		return nil, nil
	}
	mesh, err := s.meshConfig(ctx)
	if err != nil {
		return nil, err
	}
	return httpProvider(mesh, name)
}

// httpProvider finds the envoyExtAuthzHttp extension provider name.
func httpProvider(mesh *meshv1alpha1.MeshConfig, name string) (*meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider, error) {
	for _, p := range mesh.GetExtensionProviders() {
		if p.GetName() != name {
			continue
		}
		if h := p.GetEnvoyExtAuthzHttp(); h != nil {
			return h, nil
		}
		return nil, fmt.Errorf("extension provider %q is not envoyExtAuthzHttp (the stand-in imitates no other)", name)
	}
	return nil, fmt.Errorf("the mesh config defines no extension provider %q", name)
}

// parseMeshConfig reads the YAML of a MeshConfig, as the ConfigMap istio
// holds it under "mesh" (fields it does not know are ignored, as istiod
// ignores a newer Istio's).
func parseMeshConfig(text string) (*meshv1alpha1.MeshConfig, error) {
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, err
	}
	mesh := &meshv1alpha1.MeshConfig{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, mesh); err != nil {
		return nil, err
	}
	return mesh, nil
}

func (s *sidecar) meshConfig(ctx context.Context) (*meshv1alpha1.MeshConfig, error) {
	ns, name, _ := strings.Cut(s.mesh, "/")
	cm := &corev1.ConfigMap{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", s.mesh, err)
	}
	mesh, err := parseMeshConfig(cm.Data["mesh"])
	if err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", s.mesh, err)
	}
	return mesh, nil
}

// serviceAddress resolves the provider's service, [<namespace>/]<name>.<ns>.svc...,
// to its cluster IP through the API (the node has no cluster DNS).
func (s *sidecar) serviceAddress(ctx context.Context, service string) (string, error) {
	if _, host, ok := strings.Cut(service, "/"); ok {
		service = host
	}
	parts := strings.Split(service, ".")
	if len(parts) < 2 {
		return "", fmt.Errorf("provider service %q is not <name>.<namespace>.svc.<domain>", service)
	}
	svc := &corev1.Service{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: parts[1], Name: parts[0]}, svc); err != nil {
		return "", fmt.Errorf("provider service %s: %w", service, err)
	}
	return svc.Spec.ClusterIP, nil
}

// policyMatches reports whether a rule of a CUSTOM policy matches r (a
// policy without rules matches nothing, as Istio's).
func policyMatches(spec *securityapi.AuthorizationPolicy, r *http.Request) (bool, error) {
	for _, rule := range spec.GetRules() {
		if len(rule.GetFrom()) > 0 || len(rule.GetWhen()) > 0 {
			return false, fmt.Errorf("a rule has from or when, which the stand-in does not evaluate")
		}
		if len(rule.GetTo()) == 0 {
			return true, nil
		}
		for _, to := range rule.GetTo() {
			if operationMatches(to.GetOperation(), r) {
				return true, nil
			}
		}
	}
	return false, nil
}

// operationMatches is Istio's match of one operation: every field set
// must match, each list by any entry, each not-list by none.
func operationMatches(op *securityapi.Operation, r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	fold := func(v string) string { return strings.ToLower(v) }
	checks := []struct {
		values []string
		not    bool
		value  string
		norm   func(string) string
	}{
		{op.GetHosts(), false, host, fold},
		{op.GetNotHosts(), true, host, fold},
		{op.GetPaths(), false, r.URL.Path, nil},
		{op.GetNotPaths(), true, r.URL.Path, nil},
		{op.GetMethods(), false, r.Method, nil},
		{op.GetNotMethods(), true, r.Method, nil},
	}
	for _, c := range checks {
		if len(c.values) == 0 {
			continue
		}
		if anyMatch(c.values, c.value, c.norm) == c.not {
			return false
		}
	}
	return true
}

// anyMatch reports whether value matches one of Istio's string forms:
// exact, "prefix*", "*suffix" or "*".
func anyMatch(patterns []string, value string, norm func(string) string) bool {
	if norm != nil {
		value = norm(value)
	}
	for _, p := range patterns {
		if norm != nil {
			p = norm(p)
		}
		switch {
		case p == "*":
			return true
		case strings.HasSuffix(p, "*") && strings.HasPrefix(value, strings.TrimSuffix(p, "*")):
			return true
		case strings.HasPrefix(p, "*") && strings.HasSuffix(value, strings.TrimPrefix(p, "*")):
			return true
		case p == value:
			return true
		}
	}
	return false
}

// headerListed reports whether header name (any case) is named by one of
// the mesh config's header patterns (exact, "prefix*", "*suffix"), which
// Envoy compares with its lower-case header names.
func headerListed(patterns []string, name string) bool {
	return anyMatch(patterns, name, strings.ToLower)
}

// verdict is the outcome of one check.
type verdict struct {
	allowed bool
	// status and body of a denial.
	status int
	body   []byte
	// upstream replaces the request's headers on allow; downstream goes to
	// the client (added on allow, the whole header on deny).
	upstream, downstream http.Header
}

// checkRequest is the authorization request Envoy's HTTP ext_authz filter
// sends for r to the provider at addr.
func checkRequest(ctx context.Context, p *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider, addr string, r *http.Request) (*http.Request, error) {
	target := "http://" + net.JoinHostPort(addr, strconv.Itoa(int(p.GetPort()))) + p.GetPathPrefix() + r.URL.RequestURI()
	req, err := http.NewRequestWithContext(ctx, r.Method, target, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Host = r.Host
	listed := append(p.GetIncludeRequestHeadersInCheck(), p.GetIncludeHeadersInCheck()...) //nolint:staticcheck // the deprecated field still counts
	for k, vs := range r.Header {
		if headerListed(listed, k) && !strings.EqualFold(k, headerContentLength) {
			req.Header[k] = append([]string(nil), vs...)
		}
	}
	for k, v := range p.GetIncludeAdditionalHeadersInCheck() {
		req.Header.Set(k, v)
	}
	req.ContentLength = 0
	req.Header.Set(headerContentLength, "0")
	return req, nil
}

// checkHTTP asks the provider at addr about r.
func checkHTTP(ctx context.Context, c *http.Client, p *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider, addr string, r *http.Request) verdict {
	timeout := 600 * time.Second
	if t := p.GetTimeout(); t != nil {
		timeout = t.AsDuration()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	failed := func(err error) verdict {
		log.Printf("ext_authz call to %s: %v", p.GetService(), err)
		if p.GetFailOpen() {
			return verdict{allowed: true}
		}
		status := http.StatusForbidden
		if n, err := strconv.Atoi(p.GetStatusOnError()); err == nil && n >= 200 && n <= 599 {
			status = n
		}
		return verdict{status: status, downstream: http.Header{}}
	}
	if addr == "" {
		return failed(fmt.Errorf("no address for the provider"))
	}
	req, err := checkRequest(ctx, p, addr, r)
	if err != nil {
		return failed(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return failed(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return failed(err)
	}
	if resp.StatusCode >= 500 && p.GetFailOpen() {
		return verdict{allowed: true}
	}
	return decide(p, resp.StatusCode, resp.Header, body)
}

// decide turns the provider's answer into a verdict, as Envoy does.
func decide(p *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyExternalAuthorizationHttpProvider, status int, h http.Header, body []byte) verdict {
	pick := func(patterns []string, all bool) http.Header {
		out := http.Header{}
		for k, vs := range h {
			if strings.EqualFold(k, headerContentLength) {
				continue
			}
			if (all && !strings.EqualFold(k, "Authorization")) || headerListed(patterns, k) {
				out[k] = append([]string(nil), vs...)
			}
		}
		return out
	}
	if status == http.StatusOK {
		return verdict{
			allowed:    true,
			upstream:   pick(p.GetHeadersToUpstreamOnAllow(), false),
			downstream: pick(p.GetHeadersToDownstreamOnAllow(), false),
		}
	}
	deny := p.GetHeadersToDownstreamOnDeny()
	return verdict{status: status, body: body, downstream: pick(deny, len(deny) == 0)}
}
