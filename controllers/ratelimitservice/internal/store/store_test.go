package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/portico-dev/portico/internal/globallimit"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// replicas returns n stores sharing one miniredis at t0 (two stores are
// two replicas of the service).
func replicas(t *testing.T, n int, maxKeys int64) (*miniredis.Miniredis, []*Redis) {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(t0)
	var stores []*Redis
	for range n {
		r := New(maxKeys, nil)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		r.SetClient(c)
		stores = append(stores, r)
	}
	return m, stores
}

func decide(t *testing.T, r *Redis, q Request) Result {
	t.Helper()
	res, err := r.Decide(context.Background(), []Request{q})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return res[0]
}

// admitted counts the results that are not over.
func admitted(results []Result) int {
	n := 0
	for _, r := range results {
		if !r.Over {
			n++
		}
	}
	return n
}

// expectTTLs checks that every key of m expires.
func expectTTLs(g *WithT, m *miniredis.Miniredis) {
	g.Expect(m.Keys()).NotTo(BeEmpty())
	for _, k := range m.Keys() {
		g.Expect(m.TTL(k)).To(BeNumerically(">", 0), "key %s has no TTL", k)
	}
}

var (
	perMinute = globallimit.Limit{ID: "rl/a", Requests: 5, Unit: globallimit.Minute, Algorithm: globallimit.FixedWindow}
	bucket    = globallimit.Limit{ID: "rl/b", Requests: 1, Unit: globallimit.Second, Algorithm: globallimit.TokenBucket, Burst: 3}
)

func TestFixedWindowExactlyNAcrossReplicas(t *testing.T) {
	g := NewWithT(t)
	m, rs := replicas(t, 2, 100)
	var results []Result
	for i := range 12 {
		results = append(results, decide(t, rs[i%2], Request{Namespace: "team-a", Limit: perMinute, Client: "c1", Hits: 1}))
	}
	g.Expect(admitted(results)).To(Equal(5))
	g.Expect(results[0].Remaining).To(Equal(int64(4)))
	g.Expect(results[4].Remaining).To(Equal(int64(0)))
	g.Expect(results[0].Reset).To(Equal(time.Minute))
	expectTTLs(g, m)
	for _, k := range m.Keys() {
		g.Expect(m.TTL(k)).To(Equal(time.Minute + Slack))
	}

	// The next window starts afresh.
	m.SetTime(t0.Add(time.Minute + 30*time.Second))
	res := decide(t, rs[1], Request{Namespace: "team-a", Limit: perMinute, Client: "c1", Hits: 1})
	g.Expect(res.Over).To(BeFalse())
	g.Expect(res.Remaining).To(Equal(int64(4)))
	g.Expect(res.Reset).To(Equal(30 * time.Second))
}

func TestFixedWindowHitsAddend(t *testing.T) {
	g := NewWithT(t)
	_, rs := replicas(t, 1, 100)
	g.Expect(decide(t, rs[0], Request{Namespace: "ns", Limit: perMinute, Client: "c", Hits: 5}).Over).To(BeFalse())
	g.Expect(decide(t, rs[0], Request{Namespace: "ns", Limit: perMinute, Client: "c", Hits: 0}).Over).To(BeFalse(), "a read does not count")
	g.Expect(decide(t, rs[0], Request{Namespace: "ns", Limit: perMinute, Client: "c", Hits: 1}).Over).To(BeTrue())
}

func TestSeparateBudgets(t *testing.T) {
	g := NewWithT(t)
	_, rs := replicas(t, 1, 100)
	for _, q := range []Request{
		{Namespace: "team-a", Limit: perMinute, Client: "c1", Hits: 5},
		{Namespace: "team-a", Limit: perMinute, Client: "c2", Hits: 5},
		{Namespace: "team-b", Limit: perMinute, Client: "c1", Hits: 5},
		{Namespace: "team-a", Limit: bucket, Client: "c1", Hits: 3},
		{Namespace: "team-b", Limit: bucket, Client: "c1", Hits: 3},
	} {
		g.Expect(decide(t, rs[0], q).Over).To(BeFalse(), "%+v", q)
	}
	for _, q := range []Request{
		{Namespace: "team-a", Limit: perMinute, Client: "c1", Hits: 1},
		{Namespace: "team-a", Limit: bucket, Client: "c1", Hits: 1},
	} {
		g.Expect(decide(t, rs[0], q).Over).To(BeTrue(), "%+v", q)
	}
}

func TestTokenBucketAcrossReplicas(t *testing.T) {
	g := NewWithT(t)
	m, rs := replicas(t, 2, 100)
	var results []Result
	for i := range 6 {
		results = append(results, decide(t, rs[i%2], Request{Namespace: "ns", Limit: bucket, Client: "c", Hits: 1}))
	}
	g.Expect(admitted(results)).To(Equal(3), "the burst")
	g.Expect(results[0].Remaining).To(Equal(int64(2)))
	g.Expect(results[2].Remaining).To(Equal(int64(0)))
	g.Expect(results[2].Reset).To(Equal(3*time.Second), "full again in three refills")
	expectTTLs(g, m)

	// One second refills one token.
	m.SetTime(t0.Add(time.Second))
	g.Expect(decide(t, rs[1], Request{Namespace: "ns", Limit: bucket, Client: "c", Hits: 1}).Over).To(BeFalse())
	g.Expect(decide(t, rs[0], Request{Namespace: "ns", Limit: bucket, Client: "c", Hits: 1}).Over).To(BeTrue())

	// Long idle: full again, never beyond capacity.
	m.SetTime(t0.Add(time.Hour))
	res := decide(t, rs[0], Request{Namespace: "ns", Limit: bucket, Client: "c", Hits: 1})
	g.Expect(res.Over).To(BeFalse())
	g.Expect(res.Remaining).To(Equal(int64(2)))
}

func TestTokenBucketRefusalDoesNotConsume(t *testing.T) {
	g := NewWithT(t)
	_, rs := replicas(t, 1, 100)
	g.Expect(decide(t, rs[0], Request{Namespace: "ns", Limit: bucket, Client: "c", Hits: 2}).Over).To(BeFalse())
	g.Expect(decide(t, rs[0], Request{Namespace: "ns", Limit: bucket, Client: "c", Hits: 2}).Over).To(BeTrue())
	res := decide(t, rs[0], Request{Namespace: "ns", Limit: bucket, Client: "c", Hits: 1})
	g.Expect(res.Over).To(BeFalse())
	g.Expect(res.Remaining).To(Equal(int64(0)))
}

func TestOverflowBeyondKeyBound(t *testing.T) {
	for _, l := range []globallimit.Limit{perMinute, bucket} {
		t.Run(string(l.Algorithm), func(t *testing.T) {
			g := NewWithT(t)
			m, rs := replicas(t, 2, 3)
			budget := int(l.Capacity())
			// Three clients get budgets of their own.
			for i := range 3 {
				res := decide(t, rs[i%2], Request{Namespace: "ns", Limit: l, Client: fmt.Sprint("own", i), Hits: 1})
				g.Expect(res.Overflow).To(BeFalse())
			}
			// A flood of new clients shares one overflow budget.
			var flood []Result
			for i := range 50 {
				flood = append(flood, decide(t, rs[i%2], Request{Namespace: "ns", Limit: l, Client: fmt.Sprint("flood", i), Hits: 1}))
			}
			for _, r := range flood {
				g.Expect(r.Overflow).To(BeTrue())
			}
			g.Expect(admitted(flood)).To(Equal(budget))
			// The clients with a key keep theirs.
			res := decide(t, rs[0], Request{Namespace: "ns", Limit: l, Client: "own0", Hits: 1})
			g.Expect(res.Overflow).To(BeFalse())
			g.Expect(res.Over).To(BeFalse())
			// Keys: three clients, the distinct counter, the overflow budget.
			g.Expect(m.Keys()).To(HaveLen(5))
			expectTTLs(g, m)
		})
	}
}

func TestLimitIDsAndNamespacesDoNotShareKeys(t *testing.T) {
	g := NewWithT(t)
	a := Keys("ns", perMinute, "c")
	b := Keys("ns", bucket, "c")
	c := Keys("other", perMinute, "c")
	g.Expect(a.Client).To(Equal("portico:{ns}:rl/a:fw:c:c"))
	g.Expect(b.Client).To(Equal("portico:{ns}:rl/b:tb:c:c"))
	g.Expect(c.Client).To(HavePrefix("portico:{other}:"))
	g.Expect(a.Overflow).NotTo(Equal(c.Overflow))
}

func TestPipelineAndScriptFlush(t *testing.T) {
	g := NewWithT(t)
	m, rs := replicas(t, 1, 100)
	reqs := []Request{
		{Namespace: "ns", Limit: perMinute, Client: "c", Hits: 1},
		{Namespace: "ns", Limit: bucket, Client: "c", Hits: 1},
	}
	res, err := rs[0].Decide(context.Background(), reqs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(HaveLen(2))
	// A Redis that lost its scripts (restart, SCRIPT FLUSH) is sent them
	// again.
	m.FlushAll()
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	g.Expect(c.ScriptFlush(context.Background()).Err()).To(Succeed())
	res, err = rs[0].Decide(context.Background(), reqs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res[0].Remaining).To(Equal(int64(4)))
	g.Expect(res[1].Remaining).To(Equal(int64(2)))
}

func TestRedisDown(t *testing.T) {
	g := NewWithT(t)
	m, rs := replicas(t, 1, 100)
	var ups []bool
	r := New(100, func(up bool) { ups = append(ups, up) })
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer c.Close()
	r.SetClient(c)
	g.Expect(r.Ping(context.Background())).To(Succeed())
	g.Expect(r.Up()).To(BeTrue())

	m.Close()
	_, err := r.Decide(context.Background(), []Request{{Namespace: "ns", Limit: perMinute, Client: "c", Hits: 1}})
	g.Expect(err).To(HaveOccurred())
	g.Expect(r.Up()).To(BeFalse(), "a failed decision marks Redis down at once")
	g.Expect(r.Ping(context.Background())).NotTo(Succeed())
	g.Expect(ups).To(Equal([]bool{false, true, false}))
	_ = rs

	none := New(1, nil)
	_, err = none.Decide(context.Background(), []Request{{Namespace: "ns", Limit: perMinute, Client: "c", Hits: 1}})
	g.Expect(err).To(MatchError(ErrNoRedis))
	g.Expect(none.Ping(context.Background())).To(MatchError(ErrNoRedis))
}

func TestCallerGivingUpIsNotRedisDown(t *testing.T) {
	g := NewWithT(t)
	_, rs := replicas(t, 1, 100)
	g.Expect(rs[0].Ping(context.Background())).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := rs[0].Decide(ctx, []Request{{Namespace: "ns", Limit: perMinute, Client: "c", Hits: 1}})
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(rs[0].Up()).To(BeTrue(), "Envoy's timeout says nothing about Redis")
}
