package service

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/config"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/metrics"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/store"
	"github.com/portico-dev/portico/internal/globallimit"
)

var key = []byte("0123456789abcdef0123456789abcdef")

// configs is a fixed feed.
type configs struct {
	key     []byte
	tenants map[string]*config.Tenant
}

func (c configs) Key() []byte { return c.key }
func (c configs) Tenant(ns string) (*config.Tenant, bool) {
	t, ok := c.tenants[ns]
	return t, ok
}

var teamA = globallimit.Config{Namespace: "team-a", Limits: []globallimit.Limit{
	{ID: "api/fixed", Requests: 2, Unit: globallimit.Minute, Algorithm: globallimit.FixedWindow, Headers: true},
	{ID: "api/bucket", Requests: 1, Unit: globallimit.Second, Algorithm: globallimit.TokenBucket, Burst: 2, Headers: true},
	{ID: "api/shadow", Requests: 1, Unit: globallimit.Hour, Algorithm: globallimit.FixedWindow, Shadow: true, Headers: true},
}}

func entry(k, v string) *ratelimitv3.RateLimitDescriptor_Entry {
	return &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
}

// descriptor is what the filters send for limit id of namespace ns,
// followed by client entries.
func descriptor(ns, id string, client ...*ratelimitv3.RateLimitDescriptor_Entry) *ratelimitv3.RateLimitDescriptor {
	return withToken(globallimit.Token(key, ns), id, client...)
}

func withToken(token, id string, client ...*ratelimitv3.RateLimitDescriptor_Entry) *ratelimitv3.RateLimitDescriptor {
	entries := []*ratelimitv3.RateLimitDescriptor_Entry{entry(globallimit.TokenKey, token), entry(globallimit.LimitKey, id)}
	return &ratelimitv3.RateLimitDescriptor{Entries: append(entries, client...)}
}

func request(ns string, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: globallimit.Domain(ns), Descriptors: ds}
}

// newService returns a service over a fresh miniredis at a fixed time.
func newService(t *testing.T) (*Service, *miniredis.Miniredis, *store.Redis) {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	r := store.New(100, nil)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	r.SetClient(c)
	return &Service{
		Configs: configs{key: key, tenants: map[string]*config.Tenant{"team-a": config.NewTenant(teamA)}},
		Store:   r,
	}, m, r
}

func TestClientHash(t *testing.T) {
	hash := func(kv ...string) string {
		var es []*ratelimitv3.RateLimitDescriptor_Entry
		for i := 0; i < len(kv); i += 2 {
			es = append(es, entry(kv[i], kv[i+1]))
		}
		return ClientHash(es)
	}
	cases := map[string]struct {
		a, b []string
		same bool
	}{
		"deterministic":                  {[]string{"header:x-api-key", "k1"}, []string{"header:x-api-key", "k1"}, true},
		"values differ":                  {[]string{"header:x-api-key", "k1"}, []string{"header:x-api-key", "k2"}, false},
		"keys differ":                    {[]string{"header:a", "v"}, []string{"header:b", "v"}, false},
		"key and value boundary moves":   {[]string{"ab", "c"}, []string{"a", "bc"}, false},
		"entry boundary moves":           {[]string{"a", "b", "c", "d"}, []string{"a", "bc", "", "d"}, false},
		"order matters":                  {[]string{"a", "1", "b", "2"}, []string{"b", "2", "a", "1"}, false},
		"empty entry is not no entry":    {[]string{"", ""}, nil, false},
		"no entries is one shared value": {nil, nil, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			a, b := hash(tc.a...), hash(tc.b...)
			g.Expect(a).To(HaveLen(32))
			g.Expect(a).To(MatchRegexp("^[0-9a-f]+$"), "no raw value reaches Redis")
			g.Expect(a == b).To(Equal(tc.same))
		})
	}
}

func TestCheckDescriptor(t *testing.T) {
	cases := map[string]struct {
		key     []byte
		d       *ratelimitv3.RateLimitDescriptor
		want    string
		wantErr string
	}{
		"valid":                     {key: key, d: descriptor("team-a", "api/fixed", entry("remote_address", "10.0.0.1")), want: "api/fixed"},
		"valid without client":      {key: key, d: descriptor("team-a", "api/fixed"), want: "api/fixed"},
		"other tenant's token":      {key: key, d: descriptor("team-b", "api/fixed"), wantErr: "is not namespace team-a's"},
		"token of another key":      {key: []byte("another key"), d: descriptor("team-a", "api/fixed"), wantErr: "is not namespace team-a's"},
		"no key":                    {key: nil, d: descriptor("team-a", "api/fixed"), wantErr: "is not namespace team-a's"},
		"empty token":               {key: key, d: withToken("", "api/fixed"), wantErr: "is not namespace team-a's"},
		"token entry second":        {key: key, d: &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry(globallimit.LimitKey, "api/fixed"), entry(globallimit.TokenKey, globallimit.Token(key, "team-a"))}}, wantErr: "first entry is not portico_token"},
		"no entries":                {key: key, d: &ratelimitv3.RateLimitDescriptor{}, wantErr: "first entry is not portico_token"},
		"no limit entry":            {key: key, d: &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry(globallimit.TokenKey, globallimit.Token(key, "team-a"))}}, wantErr: "second entry is not portico_limit"},
		"client entry before limit": {key: key, d: &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry(globallimit.TokenKey, globallimit.Token(key, "team-a")), entry("remote_address", "x")}}, wantErr: "second entry is not portico_limit"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			id, err := CheckDescriptor(tc.key, "team-a", tc.d)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				if len(tc.d.GetEntries()) > 0 && tc.d.GetEntries()[0].GetValue() != "" {
					g.Expect(err.Error()).NotTo(ContainSubstring(tc.d.GetEntries()[0].GetValue()))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(tc.want))
		})
	}
}

func TestHits(t *testing.T) {
	cases := map[string]struct {
		request uint32
		d       *ratelimitv3.RateLimitDescriptor
		want    int64
	}{
		"default is one":            {0, &ratelimitv3.RateLimitDescriptor{}, 1},
		"request's addend":          {5, &ratelimitv3.RateLimitDescriptor{}, 5},
		"descriptor's overrides":    {5, &ratelimitv3.RateLimitDescriptor{HitsAddend: wrapperspb.UInt64(7)}, 7},
		"descriptor's zero reads":   {5, &ratelimitv3.RateLimitDescriptor{HitsAddend: wrapperspb.UInt64(0)}, 0},
		"bounded":                   {0, &ratelimitv3.RateLimitDescriptor{HitsAddend: wrapperspb.UInt64(1 << 62)}, maxHits},
		"negative hits are ignored": {3, &ratelimitv3.RateLimitDescriptor{IsNegativeHits: true}, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Hits(&rlsv3.RateLimitRequest{HitsAddend: tc.request}, tc.d)).To(Equal(tc.want))
		})
	}
}

func TestResponse(t *testing.T) {
	fixed := teamA.Limits[0]
	shadow := teamA.Limits[2]
	bucketLimit := teamA.Limits[1]
	under := store.Result{Remaining: 1, Reset: 30 * time.Second}
	over := store.Result{Over: true, Reset: 10 * time.Second}
	status := func(code rlsv3.RateLimitResponse_Code, id string, l globallimit.Limit, unit rlsv3.RateLimitResponse_RateLimit_Unit, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
		return &rlsv3.RateLimitResponse_DescriptorStatus{
			Code:               code,
			CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: id, RequestsPerUnit: uint32(l.Requests), Unit: unit},
			LimitRemaining:     remaining,
			DurationUntilReset: durationpb.New(reset),
		}
	}
	okUnknown := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	cases := map[string]struct {
		decisions []Decision
		overall   rlsv3.RateLimitResponse_Code
		statuses  []*rlsv3.RateLimitResponse_DescriptorStatus
		codes     []metrics.Code
	}{
		"no descriptors": {nil, rlsv3.RateLimitResponse_OK, []*rlsv3.RateLimitResponse_DescriptorStatus{}, nil},
		"under": {
			[]Decision{{ID: fixed.ID, Limit: &fixed, Result: under}},
			rlsv3.RateLimitResponse_OK,
			[]*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OK, fixed.ID, fixed, rlsv3.RateLimitResponse_RateLimit_MINUTE, 1, 30*time.Second)},
			[]metrics.Code{metrics.OK},
		},
		"one over makes the whole over": {
			[]Decision{{ID: bucketLimit.ID, Limit: &bucketLimit, Result: under}, {ID: fixed.ID, Limit: &fixed, Result: over}},
			rlsv3.RateLimitResponse_OVER_LIMIT,
			[]*rlsv3.RateLimitResponse_DescriptorStatus{
				status(rlsv3.RateLimitResponse_OK, bucketLimit.ID, bucketLimit, rlsv3.RateLimitResponse_RateLimit_SECOND, 1, 30*time.Second),
				status(rlsv3.RateLimitResponse_OVER_LIMIT, fixed.ID, fixed, rlsv3.RateLimitResponse_RateLimit_MINUTE, 0, 10*time.Second),
			},
			[]metrics.Code{metrics.OK, metrics.OverLimit},
		},
		"shadow over answers OK": {
			[]Decision{{ID: shadow.ID, Limit: &shadow, Result: over}},
			rlsv3.RateLimitResponse_OK,
			[]*rlsv3.RateLimitResponse_DescriptorStatus{status(rlsv3.RateLimitResponse_OK, shadow.ID, shadow, rlsv3.RateLimitResponse_RateLimit_HOUR, 0, 10*time.Second)},
			[]metrics.Code{metrics.ShadowOverLimit},
		},
		"no figures for a RateLimit without responseHeaders": {
			[]Decision{{ID: fixed.ID, Limit: &globallimit.Limit{ID: fixed.ID, Requests: 2, Unit: globallimit.Minute, Algorithm: globallimit.FixedWindow}, Result: over}},
			rlsv3.RateLimitResponse_OVER_LIMIT,
			[]*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OVER_LIMIT}},
			[]metrics.Code{metrics.OverLimit},
		},
		"unknown limit answers OK": {
			[]Decision{{ID: "api/new"}, {ID: fixed.ID, Limit: &fixed, Result: under}},
			rlsv3.RateLimitResponse_OK,
			[]*rlsv3.RateLimitResponse_DescriptorStatus{okUnknown, status(rlsv3.RateLimitResponse_OK, fixed.ID, fixed, rlsv3.RateLimitResponse_RateLimit_MINUTE, 1, 30*time.Second)},
			[]metrics.Code{metrics.UnknownLimit, metrics.OK},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			resp := Response(tc.decisions)
			g.Expect(resp.GetOverallCode()).To(Equal(tc.overall))
			g.Expect(resp.GetStatuses()).To(HaveLen(len(tc.statuses)))
			for i, st := range tc.statuses {
				g.Expect(resp.GetStatuses()[i].String()).To(Equal(st.String()), "status %d", i)
				g.Expect(tc.decisions[i].Code()).To(Equal(tc.codes[i]))
			}
		})
	}
}

func TestShouldRateLimit(t *testing.T) {
	g := NewWithT(t)
	svc, _, _ := newService(t)
	ctx := context.Background()
	ask := func(ds ...*ratelimitv3.RateLimitDescriptor) rlsv3.RateLimitResponse_Code {
		resp, err := svc.ShouldRateLimit(ctx, request("team-a", ds...))
		g.Expect(err).NotTo(HaveOccurred())
		return resp.GetOverallCode()
	}
	alice := entry("header:x-api-key", "alice")
	bob := entry("header:x-api-key", "bob")
	g.Expect(ask(descriptor("team-a", "api/fixed", alice))).To(Equal(rlsv3.RateLimitResponse_OK))
	g.Expect(ask(descriptor("team-a", "api/fixed", alice))).To(Equal(rlsv3.RateLimitResponse_OK))
	g.Expect(ask(descriptor("team-a", "api/fixed", alice))).To(Equal(rlsv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(ask(descriptor("team-a", "api/fixed", bob))).To(Equal(rlsv3.RateLimitResponse_OK), "bob has a budget of his own")

	shadowBefore := testutil.ToFloat64(metrics.Decisions(metrics.ShadowOverLimit))
	g.Expect(ask(descriptor("team-a", "api/shadow"))).To(Equal(rlsv3.RateLimitResponse_OK))
	g.Expect(ask(descriptor("team-a", "api/shadow"))).To(Equal(rlsv3.RateLimitResponse_OK), "a shadow limit never refuses")
	g.Expect(testutil.ToFloat64(metrics.Decisions(metrics.ShadowOverLimit)) - shadowBefore).To(Equal(1.0))

	unknownBefore := testutil.ToFloat64(metrics.Decisions(metrics.UnknownLimit))
	g.Expect(ask(descriptor("team-a", "api/not-yet"))).To(Equal(rlsv3.RateLimitResponse_OK))
	g.Expect(testutil.ToFloat64(metrics.Decisions(metrics.UnknownLimit)) - unknownBefore).To(Equal(1.0))

	// Several descriptors in one call: any over is over.
	resp, err := svc.ShouldRateLimit(ctx, request("team-a", descriptor("team-a", "api/bucket", bob), descriptor("team-a", "api/fixed", alice)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetOverallCode()).To(Equal(rlsv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(resp.GetStatuses()[0].GetCode()).To(Equal(rlsv3.RateLimitResponse_OK))
	g.Expect(resp.GetStatuses()[0].GetLimitRemaining()).To(Equal(uint32(1)))
	g.Expect(resp.GetStatuses()[1].GetCode()).To(Equal(rlsv3.RateLimitResponse_OVER_LIMIT))
}

func TestNamespaceWithoutConfigAnswersOK(t *testing.T) {
	g := NewWithT(t)
	svc, m, _ := newService(t)
	resp, err := svc.ShouldRateLimit(context.Background(), request("team-b", descriptor("team-b", "api/fixed")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetOverallCode()).To(Equal(rlsv3.RateLimitResponse_OK))
	g.Expect(m.Keys()).To(BeEmpty())
}

func TestPermissionDenied(t *testing.T) {
	cases := map[string]struct {
		key []byte
		req *rlsv3.RateLimitRequest
	}{
		"wrong token":                        {key, request("team-a", withToken("00000000000000000000000000000000", "api/fixed"))},
		"other tenant's token on its domain": {key, request("team-a", descriptor("team-b", "api/fixed"))},
		"one bad descriptor among good ones": {key, request("team-a", descriptor("team-a", "api/fixed"), descriptor("team-b", "api/fixed"))},
		"no token":                           {key, request("team-a", &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry(globallimit.LimitKey, "api/fixed")}})},
		"not a Portico domain":               {key, &rlsv3.RateLimitRequest{Domain: "team-a", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("team-a", "api/fixed")}}},
		"nested domain":                      {key, &rlsv3.RateLimitRequest{Domain: "portico/team-a/x", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("team-a", "api/fixed")}}},
		"no key loaded":                      {nil, request("team-a", descriptor("team-a", "api/fixed"))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			svc, m, _ := newService(t)
			svc.Configs = configs{key: tc.key, tenants: svc.Configs.(configs).tenants}
			before := testutil.ToFloat64(metrics.Decisions(metrics.Denied))
			_, err := svc.ShouldRateLimit(context.Background(), tc.req)
			g.Expect(status.Code(err)).To(Equal(codes.PermissionDenied))
			for _, d := range tc.req.GetDescriptors() {
				if v := d.GetEntries()[0].GetValue(); len(v) == 32 {
					g.Expect(err.Error()).NotTo(ContainSubstring(v), "the error never holds a token")
				}
			}
			g.Expect(m.Keys()).To(BeEmpty(), "nothing counted")
			g.Expect(testutil.ToFloat64(metrics.Decisions(metrics.Denied)) - before).To(Equal(1.0))
		})
	}
}

func TestRedisDownIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	svc, m, r := newService(t)
	g.Expect(r.Ping(context.Background())).To(Succeed())
	m.Close()
	before := testutil.ToFloat64(metrics.Decisions(metrics.Error))
	_, err := svc.ShouldRateLimit(context.Background(), request("team-a", descriptor("team-a", "api/fixed")))
	g.Expect(status.Code(err)).To(Equal(codes.Unavailable))
	g.Expect(r.Up()).To(BeFalse())
	g.Expect(testutil.ToFloat64(metrics.Decisions(metrics.Error)) - before).To(Equal(1.0))

	// A call naming no known limit needs no Redis.
	resp, err := svc.ShouldRateLimit(context.Background(), request("team-a", descriptor("team-a", "api/unknown")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetOverallCode()).To(Equal(rlsv3.RateLimitResponse_OK))
}

// TestGRPCRoundTrip calls the service as Envoy does: go-control-plane's
// client over a real listener.
func TestGRPCRoundTrip(t *testing.T) {
	g := NewWithT(t)
	svc, _, _ := newService(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	ctx := context.Background()

	var codesSeen []rlsv3.RateLimitResponse_Code
	for range 3 {
		resp, err := client.ShouldRateLimit(ctx, request("team-a", descriptor("team-a", "api/fixed", entry("remote_address", "10.0.0.7"))))
		g.Expect(err).NotTo(HaveOccurred())
		codesSeen = append(codesSeen, resp.GetOverallCode())
		st := resp.GetStatuses()[0]
		g.Expect(st.GetCurrentLimit().GetRequestsPerUnit()).To(Equal(uint32(2)))
		g.Expect(st.GetCurrentLimit().GetUnit()).To(Equal(rlsv3.RateLimitResponse_RateLimit_MINUTE))
		g.Expect(st.GetDurationUntilReset().AsDuration()).To(Equal(time.Minute))
	}
	g.Expect(codesSeen).To(Equal([]rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}))

	_, err = client.ShouldRateLimit(ctx, request("team-a", descriptor("team-b", "api/fixed")))
	g.Expect(status.Code(err)).To(Equal(codes.PermissionDenied))
}
