package istio

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"

	"github.com/portico-dev/portico/e2e/envoy"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// The Istio Gateway every VirtualService of the golden files and the
// corpus binds to. Its HTTP server on port 80 routes as the default
// gateway's HTTPS server does (TLS ends before the router).
const (
	istioGateway   = "istio-system/public"
	gatewayPort    = 80
	gatewaySelName = "istio"
	gatewaySelVal  = "ingressgateway"
)

// hostOf is the host a translation's VirtualService is moved to, so that
// every translation has a virtual host of its own on the one gateway.
func hostOf(name string) string { return routeObjectName(name) + ".example.com" }

// gatewayVirtualServices are the VirtualServices of the Istio-mode
// translations, each renamed after its file and moved to a host of its
// own; routes, matches and destinations stay Portico's.
func gatewayVirtualServices(trs []translation) map[string]*networkingv1.VirtualService {
	out := map[string]*networkingv1.VirtualService{}
	for _, tr := range trs {
		if tr.VirtualService == nil {
			continue
		}
		vs := tr.VirtualService.DeepCopy()
		vs.Name = routeObjectName(tr.Name)
		vs.Spec.Hosts = []string{hostOf(tr.Name)}
		out[tr.Name] = vs
	}
	return out
}

// gatewayRoutes runs Istio's configuration generation for an ingress
// gateway of the Istio Gateway with the VirtualServices, and returns the
// route configuration of its port.
func gatewayRoutes(t *testing.T, vss map[string]*networkingv1.VirtualService) *routev3.RouteConfiguration {
	t.Helper()
	gw := config.Config{
		Meta: config.Meta{GroupVersionKind: gvk.Gateway, Namespace: "istio-system", Name: "public"},
		Spec: &networking.Gateway{
			Selector: map[string]string{gatewaySelName: gatewaySelVal},
			Servers: []*networking.Server{{
				Port:  &networking.Port{Number: gatewayPort, Name: "http", Protocol: "HTTP"},
				Hosts: []string{"*/*.example.com"},
			}},
		},
	}
	configs := []config.Config{gw}
	for _, vs := range vss {
		configs = append(configs, config.Config{
			Meta: config.Meta{GroupVersionKind: gvk.VirtualService, Namespace: vs.Namespace, Name: vs.Name, CreationTimestamp: vs.CreationTimestamp.Time},
			Spec: proto.Clone(&vs.Spec).(*networking.VirtualService),
		})
	}
	cg := core.NewConfigGenTest(t, core.TestOptions{Configs: configs})
	proxy := cg.SetupProxy(&model.Proxy{
		Type:            model.Router,
		Labels:          map[string]string{gatewaySelName: gatewaySelVal},
		Metadata:        &model.NodeMetadata{Namespace: "istio-system", Labels: map[string]string{gatewaySelName: gatewaySelVal}},
		ConfigNamespace: "istio-system",
	})
	for _, rc := range cg.Routes(proxy) {
		if rc.GetName() == fmt.Sprintf("http.%d", gatewayPort) {
			return rc
		}
	}
	t.Fatalf("istiod generated no route configuration http.%d for the gateway", gatewayPort)
	return nil
}

// requestPaths are the paths a translation is probed with: the fuzzer's
// vocabulary with a segment more or less, and each match's own path.
func requestPaths(vs *networkingv1.VirtualService) []string {
	set := map[string]bool{}
	for _, p := range []string{"/", "/health", "/health/x", "/api", "/api/", "/api/x", "/api/x/y", "/api/admin", "/api/admin/",
		"/api/admin/keys", "/api/admin/keys/1", "/apix", "/apix/1", "/x/admin", "/x/y/admin", "/orders/1", "/reports/1", "/API/admin"} {
		set[p] = true
	}
	for _, h := range vs.Spec.Http {
		for _, m := range h.Match {
			switch u := m.GetUri().GetMatchType().(type) {
			case *networking.StringMatch_Exact:
				set[u.Exact], set[u.Exact+"/"] = true, true
			case *networking.StringMatch_Prefix:
				set[u.Prefix], set[u.Prefix+"x"], set[strings.TrimSuffix(u.Prefix, "/")] = true, true, true
			}
		}
	}
	delete(set, "")
	return slices.Sorted(maps.Keys(set))
}

var requestMethods = []string{"GET", "POST", "DELETE", "OPTIONS"}

// requestExtras are the headers and query parameters a probe carries,
// aimed at the fuzzer's matches (x-admin exact and prefix, x-beta regex,
// debug exact).
var requestExtras = []struct {
	headers map[string]string
	query   string
}{
	{},
	{headers: map[string]string{"x-admin": "yes", "x-beta": "1"}},
	{headers: map[string]string{"X-Admin": "y", "x-beta": "2"}},
	{headers: map[string]string{"x-beta": "12"}, query: "debug=1"},
}

// tally counts the kinds of answers.
type tally map[string]int

// gatewayVerdict is where a request goes, as the judge or Envoy says.
type gatewayVerdict struct {
	Route    string
	Clusters []string
	Path     string
	// Headers are the route's header operations, one "op name[=value]" each.
	Headers []string
}

func (v *gatewayVerdict) String() string {
	if v == nil {
		return "no route (404)"
	}
	return fmt.Sprintf("route %q to %v with path %s, headers %v", v.Route, v.Clusters, v.Path, v.Headers)
}

func judgeVerdict(vs *networkingv1.VirtualService, req envoy.Request) (*gatewayVerdict, error) {
	query, err := url.ParseQuery(req.Query)
	if err != nil {
		return nil, err
	}
	r, err := judge.RouteProbe([]*networkingv1.VirtualService{vs}, istioGateway,
		judge.Probe{Host: req.Host, Path: req.Path, Method: req.Method, Headers: req.Headers, Query: query})
	if err != nil || r == nil {
		return nil, err
	}
	v := &gatewayVerdict{Route: r.Route, Path: req.Path}
	if len(r.Destinations) > 0 {
		v.Path = r.Path
	}
	for _, d := range r.Destinations {
		host := d.Host
		if d.Service != "" {
			host = d.Service + "." + d.Namespace + ".svc.cluster.local"
		}
		v.Clusters = append(v.Clusters, fmt.Sprintf("outbound|%d||%s", d.Port, host))
	}
	for name, value := range r.RequestHeaders {
		v.Headers = append(v.Headers, "request-set "+strings.ToLower(name)+"="+value)
	}
	for _, name := range r.RemovedRequestHeaders {
		v.Headers = append(v.Headers, "request-remove "+strings.ToLower(name))
	}
	for name, value := range r.ResponseSet {
		v.Headers = append(v.Headers, "response-set "+strings.ToLower(name)+"="+value)
	}
	for name, value := range r.ResponseAdd {
		v.Headers = append(v.Headers, "response-set "+strings.ToLower(name)+"="+value)
	}
	for _, name := range r.RemovedResponse {
		v.Headers = append(v.Headers, "response-remove "+strings.ToLower(name))
	}
	v.normalize()
	return v, nil
}

func envoyVerdict(rc *routev3.RouteConfiguration, req envoy.Request) (*gatewayVerdict, error) {
	path := req.Path
	vh := envoy.VirtualHost(rc, fmt.Sprintf("%s:%d", req.Host, gatewayPort))
	if vh == nil {
		vh = envoy.VirtualHost(rc, req.Host)
	}
	if vh == nil {
		return nil, nil
	}
	rt, err := envoy.Route(vh, req)
	if err != nil || rt == nil {
		return nil, err
	}
	if rt.GetDirectResponse() != nil && rt.GetDirectResponse().GetStatus() == 404 && rt.GetName() == "" {
		return nil, nil
	}
	v := &gatewayVerdict{Route: rt.GetName(), Path: path}
	if rt.GetRoute() != nil {
		if v.Path, err = envoy.RewritePath(rt, path); err != nil {
			return nil, err
		}
	}
	for c := range envoy.Clusters(rt) {
		v.Clusters = append(v.Clusters, c)
	}
	addOps := func(prefix string, add []string, remove []string) {
		for _, a := range add {
			v.Headers = append(v.Headers, prefix+"-set "+a)
		}
		for _, r := range remove {
			v.Headers = append(v.Headers, prefix+"-remove "+strings.ToLower(r))
		}
	}
	addOps("request", headerValues(rt.GetRequestHeadersToAdd()), rt.GetRequestHeadersToRemove())
	addOps("response", headerValues(rt.GetResponseHeadersToAdd()), rt.GetResponseHeadersToRemove())
	for _, c := range rt.GetRoute().GetWeightedClusters().GetClusters() {
		addOps("request", headerValues(c.GetRequestHeadersToAdd()), c.GetRequestHeadersToRemove())
		addOps("response", headerValues(c.GetResponseHeadersToAdd()), c.GetResponseHeadersToRemove())
	}
	v.normalize()
	return v, nil
}

// headerValues are header additions as "name=value", names lower-case.
func headerValues(opts []*corev3.HeaderValueOption) []string {
	out := make([]string, 0, len(opts))
	for _, o := range opts {
		out = append(out, strings.ToLower(o.GetHeader().GetKey())+"="+o.GetHeader().GetValue())
	}
	return out
}

func (v *gatewayVerdict) normalize() {
	sort.Strings(v.Clusters)
	v.Clusters = slices.Compact(v.Clusters)
	sort.Strings(v.Headers)
	v.Headers = slices.Compact(v.Headers)
}

// count tallies what kind of answer a verdict is, so the test can prove
// its requests reached every feature it compares.
func (seen tally) count(v *gatewayVerdict) {
	if v == nil {
		seen["not routed"]++
		return
	}
	seen["routed"]++
	if len(v.Clusters) > 1 {
		seen["split"]++
	}
	if len(v.Headers) > 0 {
		seen["header operations"]++
	}
}

// agree compares the judge's verdict with Envoy's: the same route (Envoy
// names a route of a named match <route>.<match>), the same clusters, the
// same path at the backend, the same header operations.
func agree(j, e *gatewayVerdict) bool {
	if j == nil || e == nil {
		return j == nil && e == nil
	}
	return (e.Route == j.Route || strings.HasPrefix(e.Route, j.Route+".")) && slices.Equal(j.Clusters, e.Clusters) &&
		j.Path == e.Path && slices.Equal(j.Headers, e.Headers)
}

// TestJudgeRoutesAsIstiosGateway asks the tenancy judge where the gateway
// sends each probe request of each VirtualService of the golden files and
// the corpus, and checks its answer against the route configuration
// istiod generates for an ingress gateway from the same VirtualService:
// the route taken, the backends (clusters), the path they receive and the
// route's header operations. A request the judge declines (a condition it
// does not model) is counted, not compared.
func TestJudgeRoutesAsIstiosGateway(t *testing.T) {
	trs := translations(t)
	checkCoverage(t, trs)
	vss := gatewayVirtualServices(trs)
	rc := gatewayRoutes(t, vss)
	var compared, declined, disagreements int
	seen := tally{}
	for _, name := range slices.Sorted(maps.Keys(vss)) {
		vs := vss[name]
		host := hostOf(name)
		for _, path := range requestPaths(vs) {
			for _, method := range requestMethods {
				for _, extra := range requestExtras {
					req := envoy.Request{Host: host, Path: path, Method: method, Headers: extra.headers, Query: extra.query}
					j, jerr := judgeVerdict(vs, req)
					if jerr != nil {
						declined++
						continue
					}
					e, err := envoyVerdict(rc, req)
					if err != nil {
						t.Errorf("%s: %s %s: Envoy's configuration is not modelled: %v", name, method, path, err)
						continue
					}
					compared++
					seen.count(e)
					if e != nil && e.Path != path {
						seen["rewritten"]++
					}
					if !agree(j, e) {
						disagreements++
						t.Errorf("%s: VirtualService %s/%s, %s %s%s %v %s:\n  judge: %v\n  istio: %v", name, vs.Namespace, vs.Name, method, host, path, extra.headers, extra.query, j, e)
					}
				}
			}
		}
	}
	t.Logf("compared %d requests, the judge declined %d, %d disagreements; Envoy's answers: %v", compared, declined, disagreements, seen)
	for _, kind := range []string{"routed", "split", "rewritten", "header operations", "not routed"} {
		if seen[kind] < 1000 {
			t.Errorf("only %d of the requests compared were %s, want at least 1000: the comparison proves too little", seen[kind], kind)
		}
	}
}
