package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portico-dev/portico/internal/globallimit"
)

// Slack is how long a key outlives its window or its full bucket, so that
// a key never expires while it still counts.
const Slack = 2 * time.Second

// DefaultMaxKeys is the default bound on the distinct client keys of one
// limit per window.
const DefaultMaxKeys = 10000

// Request is the decision of one descriptor.
type Request struct {
	// Namespace of the tenant and its Limit.
	Namespace string
	Limit     globallimit.Limit
	// Client is the hash of the descriptor's client key (never raw
	// values): one budget per distinct Client.
	Client string
	// Hits to count (0 only reads the budget).
	Hits int64
}

// Result is what Redis decided.
type Result struct {
	// Over is true when the hits exceed the budget.
	Over bool
	// Remaining is what is left of the budget after the hits.
	Remaining int64
	// Reset is the time until the window ends (FixedWindow) or the bucket
	// is full again (TokenBucket).
	Reset time.Duration
	// Overflow is true when the client had no key of its own because the
	// limit's key bound was reached: the hits went to the shared overflow
	// budget.
	Overflow bool
}

// ErrNoRedis is returned while no Redis address is configured.
var ErrNoRedis = errors.New("no Redis address configured")

// Redis decides in a Redis server. The zero value is not usable: use New.
type Redis struct {
	// MaxKeys bounds the distinct client keys per limit and window.
	MaxKeys int64

	client atomic.Pointer[redis.Client]
	up     atomic.Bool
	// onUp reports every change of up (the redis_up gauge).
	onUp func(bool)
	wake chan struct{}
	mu   sync.Mutex // serializes up's changes with onUp
}

// New returns a store with no client yet (down until SetClient and a
// successful Ping). onUp, when set, is called with every change of Up.
func New(maxKeys int64, onUp func(bool)) *Redis {
	if maxKeys < 1 {
		maxKeys = DefaultMaxKeys
	}
	r := &Redis{MaxKeys: maxKeys, onUp: onUp, wake: make(chan struct{}, 1)}
	if onUp != nil {
		onUp(false)
	}
	return r
}

// SetClient makes the store use c from now on and returns the previous
// client (nil for none), which the caller closes once its requests ended.
// The pinger checks c at once.
func (r *Redis) SetClient(c *redis.Client) *redis.Client {
	old := r.client.Swap(c)
	r.poke()
	return old
}

// Up reports whether the last ping succeeded and no decision failed since.
func (r *Redis) Up() bool { return r.up.Load() }

func (r *Redis) setUp(up bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up.Swap(up) != up && r.onUp != nil {
		r.onUp(up)
	}
}

// poke asks the pinger for a ping now.
func (r *Redis) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Ping checks Redis and records the result in Up.
func (r *Redis) Ping(ctx context.Context) error {
	c := r.client.Load()
	if c == nil {
		r.setUp(false)
		return ErrNoRedis
	}
	if err := c.Ping(ctx).Err(); err != nil {
		r.setUp(false)
		return fmt.Errorf("ping redis %s: %w", c.Options().Addr, err)
	}
	r.setUp(true)
	return nil
}

// Run pings Redis every interval, and at once after a failed decision or a
// new client, until ctx ends. onError, when set, sees failed pings.
func (r *Redis) Run(ctx context.Context, interval time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pingCtx, cancel := context.WithTimeout(ctx, interval)
		if err := r.Ping(pingCtx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
	}
}

// Decide counts the hits of every request and returns their results, in
// one round trip to Redis (two when Redis lacks a script).
func (r *Redis) Decide(ctx context.Context, reqs []Request) ([]Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	c := r.client.Load()
	if c == nil {
		return nil, ErrNoRedis
	}
	cmds := make([]*redis.Cmd, len(reqs))
	calls := make([]call, len(reqs))
	for i, q := range reqs {
		calls[i] = r.call(q)
	}
	pipe := c.Pipeline()
	for i, k := range calls {
		cmds[i] = k.script.EvalSha(ctx, pipe, k.keys, k.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	// A server that restarted (or is new) lacks the scripts: send those
	// requests again with the script's source, which also caches it.
	var missing []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		pipe := c.Pipeline()
		for _, i := range missing {
			cmds[i] = calls[i].script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	results := make([]Result, len(reqs))
	for i, cmd := range cmds {
		res, err := parseResult(cmd)
		if err != nil {
			r.failed(ctx, err)
			return nil, fmt.Errorf("limit %q of namespace %s: %w", reqs[i].Limit.ID, reqs[i].Namespace, err)
		}
		results[i] = res
	}
	return results, nil
}

// failed records a failed decision: an error that is neither Redis's own
// answer (a script error, say) nor the caller giving up (Envoy's timeout
// cancels the call) means the connection failed or timed out, so Redis is
// down until a ping succeeds. Every failure asks for a ping now.
func (r *Redis) failed(ctx context.Context, err error) {
	var answer redis.Error
	if !errors.As(err, &answer) && ctx.Err() == nil {
		r.setUp(false)
	}
	r.poke()
}

// call is one script invocation.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
}

func (r *Redis) call(q Request) call {
	slack := int64(Slack / time.Second)
	l := q.Limit
	if l.Algorithm == globallimit.TokenBucket {
		k := Keys(q.Namespace, l, q.Client)
		return call{tokenBucketScript, []string{k.Client, k.Distinct, k.Overflow},
			[]any{l.Unit.Seconds(), l.Requests, l.Capacity(), q.Hits, r.MaxKeys, slack}}
	}
	k := Keys(q.Namespace, l, q.Client)
	return call{fixedWindowScript, []string{k.Client, k.Distinct, k.Overflow},
		[]any{l.Unit.Seconds(), l.Requests, q.Hits, r.MaxKeys, slack}}
}

// KeyNames are the keys of one decision; the fixed window's get a
// ":<window>" suffix in the script, and so does Distinct.
type KeyNames struct {
	Client, Distinct, Overflow string
}

// Keys are the key names of a decision for client (a hash) under limit l
// of namespace ns. A limit whose algorithm changes starts afresh instead
// of reading the other algorithm's keys.
func Keys(ns string, l globallimit.Limit, client string) KeyNames {
	alg := "fw"
	if l.Algorithm == globallimit.TokenBucket {
		alg = "tb"
	}
	prefix := "portico:{" + ns + "}:" + l.ID + ":" + alg + ":"
	return KeyNames{Client: prefix + "c:" + client, Distinct: prefix + "keys", Overflow: prefix + "overflow"}
}

// parseResult reads a script's answer.
func parseResult(cmd *redis.Cmd) (Result, error) {
	vals, err := cmd.Int64Slice()
	if err != nil {
		return Result{}, err
	}
	if len(vals) != 4 {
		return Result{}, fmt.Errorf("script answered %d values, not 4", len(vals))
	}
	return Result{
		Over:      vals[0] == 1,
		Remaining: max(vals[1], 0),
		Reset:     time.Duration(max(vals[2], 0)) * time.Millisecond,
		Overflow:  vals[3] == 1,
	}, nil
}
