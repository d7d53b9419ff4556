package xds

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// controlPlane is go-control-plane's own xDS server over a snapshot cache,
// recording every request it is sent.
type controlPlane struct {
	addr  string
	cache cachev3.SnapshotCache
	mu    sync.Mutex
	reqs  []*discoveryv3.DiscoveryRequest
}

func startControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cp := &controlPlane{cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		cp.reqs = append(cp.reqs, r)
		return nil
	}}
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, serverv3.NewServer(ctx, cp.cache, cb))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cp.addr = lis.Addr().String()
	return cp
}

func (cp *controlPlane) requests() []*discoveryv3.DiscoveryRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]*discoveryv3.DiscoveryRequest(nil), cp.reqs...)
}

// gatewayConfig is a gateway's configuration: one EDS cluster and its
// endpoints, one listener on 8080 whose HCM takes route http.8080 from
// RDS, and that route configuration with one virtual host.
func gatewayConfig(t *testing.T, version, vhost string) *cachev3.Snapshot {
	t.Helper()
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "outbound_0.0.0.0_8080", RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{
		Rds: &hcmv3.Rds{RouteConfigName: "http.8080", ConfigSource: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	cluster := "outbound|8080||orders.shop.svc.cluster.local"
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType: {&clusterv3.Cluster{Name: cluster, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: cluster, EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}}},
		resourcev3.EndpointType: {&endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: "10.0.0.7", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}}}}}}}}}},
		resourcev3.ListenerType: {&listenerv3.Listener{Name: "0.0.0.0_8080", Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}},
			FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}}}},
		resourcev3.RouteType: {&routev3.RouteConfiguration{Name: "http.8080", VirtualHosts: []*routev3.VirtualHost{{Name: vhost, Domains: []string{"*"}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func testNode() Node {
	return Node{Type: Router, IP: "10.0.0.9", PodName: "gateway-7d9", Namespace: "istio-system", ServiceAccount: "gateway",
		WorkloadName: "gateway", Labels: map[string]string{"istio": "ingressgateway"}}
}

// TestClientFollowsTheControlPlane: the client asks for clusters and
// listeners, then for the endpoints and routes they name, ACKs each
// version, follows an update, and NACKs a version that does not validate
// while it keeps serving the last good one.
func TestClientFollowsTheControlPlane(t *testing.T) {
	cp := startControlPlane(t)
	c := &Client{Addr: cp.addr, Node: testNode(), Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cp.cache.SetSnapshot(ctx, c.Node.ID(), gatewayConfig(t, "1", "first")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	hasVhost := func(name string) func(*Snapshot) bool {
		return func(s *Snapshot) bool {
			rc := s.Routes["http.8080"]
			return rc != nil && len(rc.GetVirtualHosts()) == 1 && rc.GetVirtualHosts()[0].GetName() == name && len(s.Endpoints) == 1 && len(s.Listeners) == 1
		}
	}
	if err := c.WaitFor(ctx, hasVhost("first")); err != nil {
		t.Fatal(err)
	}
	s := c.Current()
	if ep := s.Endpoints["outbound|8080||orders.shop.svc.cluster.local"]; ep.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress() != "10.0.0.7" {
		t.Errorf("endpoints: %v", ep)
	}
	// Every type was ACKed at version 1, by the node istiod knows.
	waitForRequests(ctx, t, cp, func(reqs []*discoveryv3.DiscoveryRequest) bool {
		acked := map[string]bool{}
		for _, r := range reqs {
			if r.GetVersionInfo() == "1" && r.GetErrorDetail() == nil && r.GetResponseNonce() != "" {
				acked[r.GetTypeUrl()] = true
			}
		}
		return len(acked) == 4
	})
	first := cp.requests()[0]
	if first.GetNode().GetId() != "router~10.0.0.9~gateway-7d9.istio-system~istio-system.svc.cluster.local" ||
		first.GetNode().GetMetadata().GetFields()["NAMESPACE"].GetStringValue() != "istio-system" ||
		first.GetNode().GetMetadata().GetFields()["LABELS"].GetStructValue().GetFields()["istio"].GetStringValue() != "ingressgateway" ||
		first.GetNode().GetMetadata().GetFields()["CLUSTER_ID"].GetStringValue() != "Kubernetes" {
		t.Errorf("the node presented: %v", first.GetNode())
	}

	if err := cp.cache.SetSnapshot(ctx, c.Node.ID(), gatewayConfig(t, "2", "second")); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFor(ctx, hasVhost("second")); err != nil {
		t.Fatal(err)
	}

	// A virtual host without a name does not validate: NACKed, the
	// second version stays.
	if err := cp.cache.SetSnapshot(ctx, c.Node.ID(), gatewayConfig(t, "3", "")); err != nil {
		t.Fatal(err)
	}
	waitForRequests(ctx, t, cp, func(reqs []*discoveryv3.DiscoveryRequest) bool {
		for _, r := range reqs {
			if r.GetTypeUrl() == RouteType && r.GetErrorDetail() != nil && r.GetVersionInfo() == "2" {
				return true
			}
		}
		return false
	})
	if c.NACKs() == 0 || !hasVhost("second")(c.Current()) || c.Current().Versions[RouteType] != "2" {
		t.Errorf("after the bad version: %d NACKs, routes %v at %s", c.NACKs(), c.Current().Routes, c.Current().Versions[RouteType])
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func waitForRequests(ctx context.Context, t *testing.T, cp *controlPlane, ok func([]*discoveryv3.DiscoveryRequest) bool) {
	t.Helper()
	for !ok(cp.requests()) {
		select {
		case <-ctx.Done():
			for _, r := range cp.requests() {
				t.Logf("request %s version %q nonce %q names %v error %v", short(r.GetTypeUrl()), r.GetVersionInfo(), r.GetResponseNonce(), r.GetResourceNames(), r.GetErrorDetail())
			}
			t.Fatal("the control plane never saw the requests waited for")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
