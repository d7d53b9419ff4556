package xds

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// The type URLs of the resources the client asks for.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// Snapshot is what the control plane said last, of each type, by name.
// A Snapshot is never changed once published.
type Snapshot struct {
	Listeners map[string]*listenerv3.Listener
	Routes    map[string]*routev3.RouteConfiguration
	Clusters  map[string]*clusterv3.Cluster
	Endpoints map[string]*endpointv3.ClusterLoadAssignment
	// Versions are the accepted version_info of each type URL.
	Versions map[string]string
}

func emptySnapshot() *Snapshot {
	return &Snapshot{Listeners: map[string]*listenerv3.Listener{}, Routes: map[string]*routev3.RouteConfiguration{},
		Clusters: map[string]*clusterv3.Cluster{}, Endpoints: map[string]*endpointv3.ClusterLoadAssignment{}, Versions: map[string]string{}}
}

func (s *Snapshot) clone() *Snapshot {
	return &Snapshot{Listeners: maps.Clone(s.Listeners), Routes: maps.Clone(s.Routes), Clusters: maps.Clone(s.Clusters),
		Endpoints: maps.Clone(s.Endpoints), Versions: maps.Clone(s.Versions)}
}

// Client holds one ADS stream to a control plane (reconnecting while its
// context lives) and the Snapshot of what it accepted.
type Client struct {
	// Addr is the control plane's host:port (plaintext gRPC: istiod's
	// 15010).
	Addr string
	Node Node
	// Logf logs protocol events (default log.Printf).
	Logf func(format string, args ...any)

	snap atomic.Pointer[Snapshot]
	mu   sync.Mutex
	// changed is closed and replaced when a new Snapshot is published.
	changed chan struct{}
	// nacks counts rejected responses (tests read it).
	nacks atomic.Int64
}

// Current is the last accepted Snapshot (empty before the first).
func (c *Client) Current() *Snapshot {
	if s := c.snap.Load(); s != nil {
		return s
	}
	return emptySnapshot()
}

// NACKs is how many responses the client rejected.
func (c *Client) NACKs() int64 { return c.nacks.Load() }

// Changed returns a channel closed at the next published Snapshot.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

func (c *Client) publish(s *Snapshot) {
	c.snap.Store(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed != nil {
		close(c.changed)
	}
	c.changed = make(chan struct{})
}

func (c *Client) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// Run keeps an ADS stream open until ctx ends, reconnecting after a
// second when it breaks; the last Snapshot stays served meanwhile (Envoy
// keeps its configuration when its control plane goes away).
func (c *Client) Run(ctx context.Context) error {
	node, err := c.Node.Proto()
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(c.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return fmt.Errorf("xds %s: %w", c.Addr, err)
	}
	defer conn.Close()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	for {
		err := c.stream(ctx, ads, node)
		if ctx.Err() != nil {
			return nil
		}
		c.logf("xds %s: stream ended: %v; again in 1s", c.Addr, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// stream is one ADS stream's life: the first requests, then one response
// at a time, each answered by an ACK or a NACK and, when the names a type
// needs changed, a request for them.
func (c *Client) stream(ctx context.Context, ads discoveryv3.AggregatedDiscoveryServiceClient, node *corev3.Node) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	st := &streamState{node: node, snap: c.Current().clone(), names: map[string][]string{}, nonces: map[string]string{}}
	for _, t := range []string{ClusterType, ListenerType} {
		if err := s.Send(st.request(t, nil)); err != nil {
			return err
		}
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		st.nonces[resp.GetTypeUrl()] = resp.GetNonce()
		next, err := accept(st.snap, resp, st.names[resp.GetTypeUrl()])
		if err != nil {
			c.nacks.Add(1)
			c.logf("xds: NACK %s version %s: %v", short(resp.GetTypeUrl()), resp.GetVersionInfo(), err)
			if err := s.Send(st.request(resp.GetTypeUrl(), err)); err != nil {
				return err
			}
			continue
		}
		st.snap = next
		c.publish(next)
		if err := s.Send(st.request(resp.GetTypeUrl(), nil)); err != nil {
			return err
		}
		// The names EDS and RDS need follow the clusters and listeners.
		for t, names := range map[string][]string{EndpointType: edsNames(next), RouteType: rdsNames(next)} {
			if !slices.Equal(names, st.names[t]) && (t == EndpointType && resp.GetTypeUrl() == ClusterType || t == RouteType && resp.GetTypeUrl() == ListenerType) {
				st.names[t] = names
				if err := s.Send(st.request(t, nil)); err != nil {
					return err
				}
			}
		}
	}
}

// streamState is what one stream has said and been told.
type streamState struct {
	node   *corev3.Node
	snap   *Snapshot
	names  map[string][]string
	nonces map[string]string
}

// request is the DiscoveryRequest of type t: the names it needs, the
// version accepted last, the nonce of the last response; with err, a NACK.
func (st *streamState) request(t string, nackErr error) *discoveryv3.DiscoveryRequest {
	req := &discoveryv3.DiscoveryRequest{Node: st.node, TypeUrl: t, ResourceNames: st.names[t],
		VersionInfo: st.snap.Versions[t], ResponseNonce: st.nonces[t]}
	if nackErr != nil {
		req.ErrorDetail = &status.Status{Code: 3, Message: nackErr.Error()} // INVALID_ARGUMENT
	}
	return req
}

// accept decodes and validates a response into a new Snapshot: a
// listener or cluster response replaces the whole set (state of the
// world); a route or endpoint response replaces the names asked for, and
// names no longer asked for are dropped.
func accept(old *Snapshot, resp *discoveryv3.DiscoveryResponse, asked []string) (*Snapshot, error) {
	next := old.clone()
	t := resp.GetTypeUrl()
	switch t {
	case ListenerType:
		next.Listeners = map[string]*listenerv3.Listener{}
	case ClusterType:
		next.Clusters = map[string]*clusterv3.Cluster{}
	case RouteType:
		next.Routes = keep(next.Routes, asked)
	case EndpointType:
		next.Endpoints = keep(next.Endpoints, asked)
	default:
		return nil, fmt.Errorf("type %s was not asked for", t)
	}
	for i, a := range resp.GetResources() {
		if a.GetTypeUrl() != t {
			return nil, fmt.Errorf("resource %d is a %s in a %s response", i, a.GetTypeUrl(), t)
		}
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
		if v, ok := m.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				return nil, fmt.Errorf("resource %d: %w", i, err)
			}
		}
		if err := store(next, m); err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
	}
	next.Versions[t] = resp.GetVersionInfo()
	return next, nil
}

func keep[T any](m map[string]T, names []string) map[string]T {
	out := map[string]T{}
	for _, n := range names {
		if v, ok := m[n]; ok {
			out[n] = v
		}
	}
	return out
}

func store(s *Snapshot, m proto.Message) error {
	switch r := m.(type) {
	case *listenerv3.Listener:
		s.Listeners[r.GetName()] = r
	case *clusterv3.Cluster:
		s.Clusters[r.GetName()] = r
	case *routev3.RouteConfiguration:
		s.Routes[r.GetName()] = r
	case *endpointv3.ClusterLoadAssignment:
		s.Endpoints[r.GetClusterName()] = r
	default:
		return fmt.Errorf("unexpected %T", m)
	}
	return nil
}

// edsNames are the service names of the clusters whose endpoints come
// from EDS, sorted.
func edsNames(s *Snapshot) []string {
	var out []string
	for name, c := range s.Clusters {
		if c.GetType() != clusterv3.Cluster_EDS {
			continue
		}
		if sn := c.GetEdsClusterConfig().GetServiceName(); sn != "" {
			name = sn
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// rdsNames are the route configurations the listeners' HTTP connection
// managers take from RDS, sorted.
func rdsNames(s *Snapshot) []string {
	var out []string
	for _, l := range s.Listeners {
		for _, hcm := range HTTPConnectionManagers(l) {
			if n := hcm.GetRds().GetRouteConfigName(); n != "" {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HTTPConnectionManagers are the HTTP connection managers of a
// listener's filter chains (and its default chain), in order.
func HTTPConnectionManagers(l *listenerv3.Listener) []*hcmv3.HttpConnectionManager {
	var out []*hcmv3.HttpConnectionManager
	chains := l.GetFilterChains()
	if l.GetDefaultFilterChain() != nil {
		chains = append(slices.Clip(chains), l.GetDefaultFilterChain())
	}
	for _, fc := range chains {
		if h := ChainHCM(fc); h != nil {
			out = append(out, h)
		}
	}
	return out
}

// ChainHCM is the HTTP connection manager of a filter chain, or nil.
func ChainHCM(fc *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	for _, f := range fc.GetFilters() {
		h := &hcmv3.HttpConnectionManager{}
		if f.GetTypedConfig().MessageIs(h) && f.GetTypedConfig().UnmarshalTo(h) == nil {
			return h
		}
	}
	return nil
}

func short(t string) string {
	switch t {
	case ClusterType:
		return "CDS"
	case ListenerType:
		return "LDS"
	case RouteType:
		return "RDS"
	case EndpointType:
		return "EDS"
	}
	return t
}

// WaitFor waits until ok holds for the current Snapshot, or ctx ends.
func (c *Client) WaitFor(ctx context.Context, ok func(*Snapshot) bool) error {
	for {
		changed := c.Changed()
		if ok(c.Current()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), errors.New("the control plane never sent what was waited for"))
		case <-changed:
		}
	}
}
