package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/e2e/envoy"
	"github.com/portico-dev/portico/e2e/xds"
)

// The backend's sidecar stand-in programmed by istiod (backend --xds
// ADDR): it asks istiod for its configuration as the pod's sidecar would
// (a sidecar node of its pod, e2e/xds) and puts every request through the
// HTTP filters of the inbound filter chain istiod computed for its port
// (listener virtualInbound; the chain whose destination_port is --listen's
// port and whose transport is plain text, else the catch-all HTTP chain),
// with e2e/envoy: RBAC, jwt_authn and ext_authz. What is Envoy's, from
// its typed configuration:
//
//   - jwt_authn: tokens where the providers look, verified against the
//     provider's local_jwks (istiod inlines the keys it fetched) or its
//     remote_jwks URI, issuer, audiences and lifetime (60 s of clock skew);
//     the payload becomes the metadata RBAC reads;
//   - ext_authz: the filter's http_service — the server's cluster (its EDS
//     endpoints), path_prefix, the request headers allowed_headers lets
//     through, headers_to_add, the answer's allowed_upstream_headers on
//     allow and allowed_client_headers on deny, the timeout, failure_mode_allow
//     and status_on_error; gRPC services are not modelled;
//   - RBAC: ALLOW, DENY and the CUSTOM shadow rules as istiod wrote them.
//
// Imitated, not Envoy: the peer's identity. The stand-ins speak plain
// text, so there is no mutual TLS to learn the peer from; with
// --peer-identity pods the stand-in finds the pod that has the peer's
// address through the API and takes spiffe://<domain>/ns/<ns>/sa/<sa> of
// its ServiceAccount, as mutual TLS would have proven it. With
// --peer-namespaces it looks only there (its token may list pods there and
// nowhere else): a peer elsewhere has no identity, as a plain-text client
// of a permissive sidecar has none. The client's
// address is the last X-Forwarded-For entry (the inbound HCM trusts no
// hop), else the peer's.

// xdsSidecar enforces what istiod sent for the pod's inbound port.
type xdsSidecar struct {
	xds  *xds.Client
	port int
	// peer is the SPIFFE identity of a peer address ("" when unknown).
	peer func(ctx context.Context, ip netip.Addr) string
	http *http.Client
	jwks *jwksCache
}

// newXDSSidecar is the backend's xDS mode: a sidecar node of its pod,
// enforcing the inbound chain of --listen's port.
func newXDSSidecar(addr string, w workload, listen, peerIdentity string, peerNamespaces []string) (*xdsSidecar, error) {
	port, err := portOf(listen)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	node := xdsNode(xds.Sidecar, w)
	if node.IP == "" || node.Namespace == "" {
		return nil, fmt.Errorf("--xds needs the pod's POD_IP and POD_NAMESPACE (or --workload-namespace) in the environment")
	}
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s := &xdsSidecar{xds: &xds.Client{Addr: addr, Node: node}, port: int(port), http: hc, jwks: &jwksCache{http: hc, sets: map[string]cachedJWKS{}}}
	switch peerIdentity {
	case "pods":
		c, err := inClusterClient(corev1.AddToScheme)
		if err != nil {
			return nil, err
		}
		s.peer = podIdentity(c, peerNamespaces)
	case "none":
	default:
		return nil, fmt.Errorf("--peer-identity %q is not pods or none", peerIdentity)
	}
	log.Printf("xds: %s as %s, inbound port %d", addr, node.ID(), port)
	return s, nil
}

// waitForInbound returns once istiod has sent the inbound listener, or
// with an error when ctx ends first.
func (s *xdsSidecar) waitForInbound(ctx context.Context) error {
	if err := s.xds.WaitFor(ctx, func(snap *xds.Snapshot) bool { return snap.Listeners["virtualInbound"] != nil }); err != nil {
		return fmt.Errorf("xds: no inbound listener: %w", err)
	}
	log.Printf("xds: the inbound listener arrived; serving")
	return nil
}

// wrap runs next behind the inbound chain's filters.
func (s *xdsSidecar) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix := fmt.Sprintf("sidecar %s %s", r.Method, r.URL.Path)
		snap := s.xds.Current()
		fc := envoy.InboundChain(snap.Listeners["virtualInbound"], s.port, func(fc *listenerv3.FilterChain) bool { return xds.ChainHCM(fc) != nil })
		if fc == nil {
			log.Printf("%s: istiod sent no inbound HTTP chain for port %d (denied)", prefix, s.port)
			http.Error(w, "no inbound configuration", http.StatusServiceUnavailable)
			return
		}
		hcm := xds.ChainHCM(fc)
		req := s.accessRequest(r)
		authorize := func(cfg *extauthzv3.ExtAuthz) (bool, error) { return s.extAuthz(w, r, snap, cfg) }
		out, err := envoy.Evaluate(hcm.GetHttpFilters(), req, s.jwks.verify, authorize)
		if err != nil {
			log.Printf("%s: %v (denied: not modelled)", prefix, err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		switch out.Decision {
		case envoy.Allowed:
			log.Printf("%s: allowed by %s (peer %q)", prefix, fc.GetName(), req.Principal)
			next.ServeHTTP(w, r)
		case envoy.Unauthenticated:
			log.Printf("%s: 401: %s", prefix, out.Reason)
			http.Error(w, "Jwt verification fails", http.StatusUnauthorized)
		case envoy.Denied:
			log.Printf("%s: 403: %s (peer %q)", prefix, out.Reason, req.Principal)
			http.Error(w, "RBAC: access denied", http.StatusForbidden)
		case envoy.DeniedByAuthorizer:
			log.Printf("%s: the external authorizer said no (%s)", prefix, out.Reason)
		default:
			http.Error(w, string(out.Decision), http.StatusInternalServerError)
		}
	})
}

// accessRequest is what the filters read of r: its port, the peer's
// identity and address, the client's address.
func (s *xdsSidecar) accessRequest(r *http.Request) envoy.AccessRequest {
	out := envoy.AccessRequest{Request: envoy.FromHTTP(r), Downstream: envoy.Downstream{Port: s.port}}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		out.DirectIP, out.RemoteIP = ap.Addr().Unmap(), ap.Addr().Unmap()
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		entries := strings.Split(xff[len(xff)-1], ",")
		if ip, err := netip.ParseAddr(strings.TrimSpace(entries[len(entries)-1])); err == nil {
			out.RemoteIP = ip
		}
	}
	if s.peer != nil && out.DirectIP.IsValid() {
		out.Principal = s.peer(r.Context(), out.DirectIP)
	}
	return out
}

// extAuthz asks the http_service of an ext_authz filter, as Envoy does;
// on a denial it answers the client itself and returns false.
func (s *xdsSidecar) extAuthz(w http.ResponseWriter, r *http.Request, snap *xds.Snapshot, cfg *extauthzv3.ExtAuthz) (bool, error) {
	svc := cfg.GetHttpService()
	if svc == nil {
		return false, fmt.Errorf("ext_authz %T is not modelled", cfg.GetServices())
	}
	deny := func(status int, why string) (bool, error) {
		log.Printf("ext_authz %s: %s", svc.GetServerUri().GetCluster(), why)
		http.Error(w, why, status)
		return false, nil
	}
	onError := func(err error) (bool, error) {
		if cfg.GetFailureModeAllow() {
			log.Printf("ext_authz %s: %v; fails open", svc.GetServerUri().GetCluster(), err)
			return true, nil
		}
		status := int(cfg.GetStatusOnError().GetCode())
		if status == 0 {
			status = http.StatusForbidden
		}
		return deny(status, err.Error())
	}
	addr, err := endpointOf(snap, svc.GetServerUri().GetCluster())
	if err != nil {
		return onError(err)
	}
	timeout := svc.GetServerUri().GetTimeout().AsDuration()
	if timeout <= 0 {
		timeout = 200 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	check, err := checkRequestOf(ctx, cfg, addr, r)
	if err != nil {
		return false, err
	}
	resp, err := s.http.Do(check)
	if err != nil {
		return onError(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		copyAllowed(w.Header(), resp.Header, svc.GetAuthorizationResponse().GetAllowedClientHeaders().GetPatterns(), true)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		log.Printf("ext_authz %s: %d", svc.GetServerUri().GetCluster(), resp.StatusCode)
		return false, nil
	}
	copyAllowed(r.Header, resp.Header, svc.GetAuthorizationResponse().GetAllowedUpstreamHeaders().GetPatterns(), false)
	copyAllowed(w.Header(), resp.Header, svc.GetAuthorizationResponse().GetAllowedClientHeadersOnSuccess().GetPatterns(), false)
	return true, nil
}

// checkRequestOf is the check Envoy sends: the method, path_prefix + the
// original path and query, the original Host, no body; the client headers
// allowed_headers names (Host, Method, Path, Content-Length and
// Authorization always) and headers_to_add.
func checkRequestOf(ctx context.Context, cfg *extauthzv3.ExtAuthz, addr string, r *http.Request) (*http.Request, error) {
	svc := cfg.GetHttpService()
	check, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+svc.GetPathPrefix()+r.URL.RequestURI(), http.NoBody)
	if err != nil {
		return nil, err
	}
	check.Host = r.Host
	allowed := cfg.GetAllowedHeaders().GetPatterns()
	for name, values := range r.Header {
		lower := strings.ToLower(name)
		ok := lower == "authorization"
		for _, m := range allowed {
			if match, _ := envoy.StringMatches(m, lower); match {
				ok = true
			}
		}
		if ok {
			check.Header[name] = values
		}
	}
	for _, h := range svc.GetAuthorizationRequest().GetHeadersToAdd() {
		check.Header.Set(h.GetKey(), h.GetValue())
	}
	return check, nil
}

// copyAllowed copies the headers of from that a pattern matches into to
// (replacing them); with authorization false, Authorization is never
// copied to a client without a pattern naming it.
func copyAllowed(to, from http.Header, patterns []*matcherv3.StringMatcher, all bool) {
	for name, values := range from {
		lower := strings.ToLower(name)
		ok := all && len(patterns) == 0 && lower != "authorization"
		for _, m := range patterns {
			if match, _ := envoy.StringMatches(m, lower); match {
				ok = true
			}
		}
		if ok {
			to[name] = values
		}
	}
}

// jwksCache fetches and keeps the key sets of remote_jwks URIs.
type jwksCache struct {
	http *http.Client
	mu   sync.Mutex
	sets map[string]cachedJWKS
}

type cachedJWKS struct {
	set     *jose.JSONWebKeySet
	fetched time.Time
}

// keys is a provider's key set: its local_jwks, or its remote_jwks URI's
// (re-fetched after a minute).
func (c *jwksCache) keys(p *jwtauthnv3.JwtProvider) (*jose.JSONWebKeySet, error) {
	if local := p.GetLocalJwks(); local != nil {
		text := local.GetInlineString()
		if text == "" {
			text = string(local.GetInlineBytes())
		}
		set := &jose.JSONWebKeySet{}
		if err := json.Unmarshal([]byte(text), set); err != nil {
			return nil, fmt.Errorf("local_jwks: %w", err)
		}
		return set, nil
	}
	uri := p.GetRemoteJwks().GetHttpUri().GetUri()
	if uri == "" {
		return nil, fmt.Errorf("the provider has no key set")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cached, ok := c.sets[uri]; ok && time.Since(cached.fetched) < time.Minute {
		return cached.set, nil
	}
	resp, err := c.http.Get(uri)
	if err != nil {
		return nil, fmt.Errorf("remote_jwks %s: %w", uri, err)
	}
	defer resp.Body.Close()
	set := &jose.JSONWebKeySet{}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(set); err != nil {
		return nil, fmt.Errorf("remote_jwks %s: %w", uri, err)
	}
	c.sets[uri] = cachedJWKS{set: set, fetched: time.Now()}
	return set, nil
}

var jwtAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// verify is jwt_authn's verification of a token for a provider.
func (c *jwksCache) verify(_ string, p *jwtauthnv3.JwtProvider, token string) (map[string]any, error) {
	set, err := c.keys(p)
	if err != nil {
		return nil, err
	}
	tok, err := jwt.ParseSigned(token, jwtAlgorithms)
	if err != nil {
		return nil, err
	}
	var payload map[string]any
	var std jwt.Claims
	verified := false
	for _, k := range set.Keys {
		if kid := tok.Headers[0].KeyID; kid != "" && k.KeyID != "" && kid != k.KeyID {
			continue
		}
		if tok.Claims(k.Key, &payload, &std) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, fmt.Errorf("no key of the provider verifies the signature")
	}
	skew := time.Duration(p.GetClockSkewSeconds()) * time.Second
	if skew == 0 {
		skew = 60 * time.Second
	}
	expected := jwt.Expected{Issuer: p.GetIssuer(), Time: time.Now()}
	if err := std.ValidateWithLeeway(expected, skew); err != nil {
		return nil, err
	}
	if auds := p.GetAudiences(); len(auds) > 0 && !slicesAny(auds, func(a string) bool { return std.Audience.Contains(a) }) {
		return nil, fmt.Errorf("audiences %v, want one of %v", std.Audience, auds)
	}
	return payload, nil
}

func slicesAny(list []string, f func(string) bool) bool {
	for _, s := range list {
		if f(s) {
			return true
		}
	}
	return false
}

// podIdentity finds the pod with address ip through the API (in the
// namespaces listed, or in all without a list) and names its
// ServiceAccount's SPIFFE identity.
func podIdentity(c client.Client, namespaces []string) func(ctx context.Context, ip netip.Addr) string {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	return func(ctx context.Context, ip netip.Addr) string {
		var pods []corev1.Pod
		for _, ns := range namespaces {
			var list corev1.PodList
			if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"status.podIP": ip.String()}); err != nil {
				log.Printf("peer %s in namespace %q: %v", ip, ns, err)
				continue
			}
			pods = append(pods, list.Items...)
		}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && !p.Spec.HostNetwork {
				sa := p.Spec.ServiceAccountName
				if sa == "" {
					sa = "default"
				}
				return fmt.Sprintf("spiffe://cluster.local/ns/%s/sa/%s", p.Namespace, sa)
			}
		}
		return ""
	}
}
