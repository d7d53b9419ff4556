package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/portico-dev/portico/e2e/xds"
)

// fakeRLS is a rate-limit service: a client named "greedy" is over the
// limit; it records the requests it answers.
type fakeRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu   sync.Mutex
	seen []*rlsv3.RateLimitRequest
}

func (f *fakeRLS) ShouldRateLimit(_ context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, r)
	for _, d := range r.GetDescriptors() {
		for _, e := range d.GetEntries() {
			if e.GetKey() == "client" && e.GetValue() == "greedy" {
				return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT}, nil
			}
		}
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

func staticCluster(name, addr string) *clusterv3.Cluster {
	host, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{
			{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(host, uint32(port))}}}}}}}}
}

// TestGatewayRateLimitsAsTheControlPlaneSaid: the rate limit filter and
// the route's per-filter rate limits istiod sent decide which requests
// the rate-limit service is asked about, with which descriptors.
func TestGatewayRateLimitsAsTheControlPlaneSaid(t *testing.T) {
	// Portico's EnvoyFilters write the filter and its per-route config as
	// udpa TypedStructs, which istiod passes through unchanged.
	for name, wrap := range map[string]func(*testing.T, proto.Message) *anypb.Any{
		"typed": mustAny, "udpa TypedStruct": mustTypedStruct,
	} {
		t.Run(name, func(t *testing.T) { testGatewayRateLimits(t, wrap) })
	}
}

// mustTypedStruct is m as a udpa TypedStruct, its value m's JSON.
func mustTypedStruct(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	raw, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	value := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, value); err != nil {
		t.Fatal(err)
	}
	return mustAny(t, &udpatypev1.TypedStruct{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: value})
}

func testGatewayRateLimits(t *testing.T, wrap func(*testing.T, proto.Message) *anypb.Any) {
	rls := &fakeRLS{}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, rls)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer backend.Close()

	filterName := "envoy.filters.http.ratelimit"
	rlCluster := "outbound|8081||portico-ratelimit.portico-system.svc.cluster.local"
	perRoute := wrap(t, &ratelimitv3.RateLimitPerRoute{RateLimits: []*routev3.RateLimit{{Actions: []*routev3.RateLimit_Action{
		{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{GenericKey: &routev3.RateLimit_Action_GenericKey{DescriptorValue: "team-a"}}},
		{ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{HeaderName: "x-client", DescriptorKey: "client"}}},
	}}}})
	hcm := &hcmv3.HttpConnectionManager{StatPrefix: "http", RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "http.8080", ConfigSource: ads()}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: filterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: wrap(t, &ratelimitv3.RateLimit{Domain: "portico", FailureModeDeny: true,
				RateLimitService: &ratelimitconfv3.RateLimitServiceConfig{TransportApiVersion: corev3.ApiVersion_V3, GrpcService: &corev3.GrpcService{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: rlCluster}}}}})}},
			{Name: "envoy.filters.http.router"},
		}}
	route := func(name, prefix string, perFilter map[string]*anypb.Any) *routev3.Route {
		return &routev3.Route{Name: name, Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}}, TypedPerFilterConfig: perFilter,
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "backend"}}}}
	}
	snap, err := cachev3.NewSnapshot("1", map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType: {staticCluster("backend", backend.Listener.Addr().String()), staticCluster(rlCluster, lis.Addr().String())},
		resourcev3.ListenerType: {&listenerv3.Listener{Name: "0.0.0.0_8080", Address: socket("0.0.0.0", 8080), FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)}}}}}}},
		resourcev3.RouteType: {&routev3.RouteConfiguration{Name: "http.8080", VirtualHosts: []*routev3.VirtualHost{{Name: "rl", Domains: []string{"*"}, Routes: []*routev3.Route{
			route("limited", "/limited", map[string]*anypb.Any{filterName: perRoute}), route("free", "/", nil),
		}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	addr, cache := xdsServer(t)
	rt := &router{}
	rt.limiter = &limiter{rt: rt, conns: map[string]*grpc.ClientConn{}}
	node := xds.Node{Type: xds.Router, IP: "10.0.0.9", PodName: "rl-1", Namespace: "rl", Labels: map[string]string{"app": "rl-gateway"}}
	g := &xdsGateway{xds: &xds.Client{Addr: addr, Node: node, Logf: t.Logf}, rt: rt}
	g.init()
	rt.limiter.resolve = g.resolveFromXDS
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cache.SetSnapshot(ctx, node.ID(), snap); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.xds.Run(ctx) }()
	if err := g.xds.WaitFor(ctx, func(s *xds.Snapshot) bool { return len(s.Routes) == 1 && len(s.Clusters) == 2 }); err != nil {
		t.Fatal(err)
	}
	g.refreshSecrets(ctx, "rl") // activates istiod's listener
	srv := httptest.NewServer(&xdsListener{g: g, port: 8080})
	defer srv.Close()
	for _, c := range []struct {
		path, client string
		status       int
	}{
		{"/limited", "polite", 200}, {"/limited", "greedy", 429}, {"/limited", "", 200}, {"/free", "greedy", 200},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
		if c.client != "" {
			req.Header.Set("X-Client", c.client)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s as %q: %d, want %d", c.path, c.client, resp.StatusCode, c.status)
		}
	}
	rls.mu.Lock()
	defer rls.mu.Unlock()
	// Only the limited route's requests with a client were asked about.
	if len(rls.seen) != 2 || rls.seen[0].GetDomain() != "portico" || len(rls.seen[0].GetDescriptors()[0].GetEntries()) != 2 {
		t.Errorf("the rate-limit service saw %v", rls.seen)
	}
	gs.Stop()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/limited", nil)
	req.Header.Set("X-Client", "polite")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("the service gone, failure_mode_deny: %d, want 500", resp.StatusCode)
	}

	// The service's pod is replaced: istiod sends its new endpoint, and
	// the next call goes there (as Envoy's load balancer would), not to
	// the address of the first call.
	rls2 := &fakeRLS{}
	gs2 := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs2, rls2)
	lis2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs2.Serve(lis2) }()
	defer gs2.Stop()
	resources := map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType: {staticCluster("backend", backend.Listener.Addr().String()), staticCluster(rlCluster, lis2.Addr().String())},
	}
	for _, typ := range []resourcev3.Type{resourcev3.ListenerType, resourcev3.RouteType} {
		for _, r := range snap.GetResources(typ) {
			resources[typ] = append(resources[typ], r)
		}
	}
	snap2, err := cachev3.NewSnapshot("2", resources)
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.SetSnapshot(ctx, node.ID(), snap2); err != nil {
		t.Fatal(err)
	}
	moved := lis2.Addr().String()
	if err := g.xds.WaitFor(ctx, func(s *xds.Snapshot) bool {
		a, err := endpointOf(s, rlCluster)
		return err == nil && a == moved
	}); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/limited", nil)
	req.Header.Set("X-Client", "greedy")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the service's new endpoint: %d, want 429 from it", resp.StatusCode)
	}
	rls2.mu.Lock()
	defer rls2.mu.Unlock()
	if len(rls2.seen) != 1 {
		t.Errorf("the service's new endpoint saw %d requests, want 1", len(rls2.seen))
	}
}
