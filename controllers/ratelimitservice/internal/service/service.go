package service

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/config"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/metrics"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/store"
	"github.com/portico-dev/portico/internal/globallimit"
)

// Configs is the service's view of the feed (config.Feed).
type Configs interface {
	// Key is the token key, nil while none is loaded.
	Key() []byte
	// Tenant returns a namespace's limits.
	Tenant(ns string) (*config.Tenant, bool)
}

// Store decides in Redis (store.Redis).
type Store interface {
	Decide(ctx context.Context, reqs []store.Request) ([]store.Result, error)
}

// Service is the RateLimitService v3 server.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	Configs Configs
	Store   Store
}

// maxHits bounds one descriptor's hits, as globallimit bounds budgets.
const maxHits = 1_000_000_000

// ShouldRateLimit decides a request's descriptors.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	defer func() { metrics.DecisionSeconds.Observe(time.Since(start).Seconds()) }()

	decisions, reqs, err := s.plan(req)
	if err != nil {
		metrics.Decided(metrics.Denied, 1)
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	results, err := s.Store.Decide(ctx, reqs)
	if err != nil {
		metrics.Decided(metrics.Error, 1)
		return nil, status.Error(codes.Unavailable, fmt.Sprintf("rate limit store: %v", err))
	}
	for i := range decisions {
		if d := &decisions[i]; d.Limit != nil {
			d.Result = results[d.request]
		}
	}
	for _, d := range decisions {
		metrics.Decided(d.Code(), 1)
		if d.Result.Overflow {
			metrics.OverflowTotal.Inc()
		}
	}
	return Response(decisions), nil
}

// plan checks a request and returns one decision per descriptor and the
// store requests of the known limits. Its error is the reason for
// PermissionDenied; it never holds a token.
func (s *Service) plan(req *rlsv3.RateLimitRequest) ([]Decision, []store.Request, error) {
	ns, ok := globallimit.NamespaceOf(req.GetDomain())
	if !ok {
		return nil, nil, fmt.Errorf("domain %q is not a Portico domain", req.GetDomain())
	}
	key := s.Configs.Key()
	if len(key) == 0 {
		return nil, nil, errors.New("no token key loaded")
	}
	tenant, loaded := s.Configs.Tenant(ns)
	decisions := make([]Decision, len(req.GetDescriptors()))
	var reqs []store.Request
	for i, d := range req.GetDescriptors() {
		id, err := CheckDescriptor(key, ns, d)
		if err != nil {
			return nil, nil, fmt.Errorf("descriptor %d: %w", i, err)
		}
		decisions[i].ID = id
		if !loaded {
			continue
		}
		l, ok := tenant.Limit(id)
		if !ok {
			continue
		}
		decisions[i].Limit = &l
		decisions[i].request = len(reqs)
		reqs = append(reqs, store.Request{
			Namespace: ns,
			Limit:     l,
			Client:    ClientHash(d.GetEntries()[2:]),
			Hits:      Hits(req, d),
		})
	}
	return decisions, reqs, nil
}

// CheckDescriptor checks a descriptor's token (constant time) and limit
// entries for namespace ns and returns its limit id. Its errors never hold
// the token.
func CheckDescriptor(key []byte, ns string, d *ratelimitv3.RateLimitDescriptor) (string, error) {
	entries := d.GetEntries()
	if len(entries) == 0 || entries[0].GetKey() != globallimit.TokenKey {
		return "", fmt.Errorf("first entry is not %s", globallimit.TokenKey)
	}
	if !globallimit.ValidToken(key, ns, entries[0].GetValue()) {
		return "", fmt.Errorf("%s is not namespace %s's", globallimit.TokenKey, ns)
	}
	if len(entries) < 2 || entries[1].GetKey() != globallimit.LimitKey || entries[1].GetValue() == "" {
		return "", fmt.Errorf("second entry is not %s", globallimit.LimitKey)
	}
	return entries[1].GetValue(), nil
}

// ClientHash is the client key of a descriptor's remaining entries: hex of
// the first 128 bits of SHA-256 over each key and value preceded by its
// length, so that no two entry lists share an input. No entries is the
// hash of nothing: one shared budget.
func ClientHash(entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	write := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	for _, e := range entries {
		write(e.GetKey())
		write(e.GetValue())
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Hits is a descriptor's hits: its own hits_addend when set, else the
// request's, 1 when that is 0 (the protocol's default); bounded, and 0 for
// negative hits (refunds are not honoured).
func Hits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	if d.GetIsNegativeHits() {
		return 0
	}
	hits := uint64(req.GetHitsAddend())
	if hits == 0 {
		hits = 1
	}
	if d.GetHitsAddend() != nil {
		hits = d.GetHitsAddend().GetValue()
	}
	return int64(min(hits, maxHits))
}
