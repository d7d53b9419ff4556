package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Code is the code label of DecisionsTotal: one per descriptor, except
// Denied and Error, counted once per call.
type Code string

// The codes.
const (
	// OK: under the limit.
	OK Code = "ok"
	// OverLimit: refused.
	OverLimit Code = "over_limit"
	// ShadowOverLimit: over a shadow limit, answered OK.
	ShadowOverLimit Code = "shadow_over_limit"
	// UnknownLimit: the limit is not (yet) in the tenant's configuration,
	// answered OK.
	UnknownLimit Code = "unknown_limit"
	// Denied: a call refused with PermissionDenied (bad token, domain or
	// descriptor, or no key loaded).
	Denied Code = "denied"
	// Error: a call answered Unavailable (Redis failed).
	Error Code = "error"
)

// Codes lists every code.
var Codes = []Code{OK, OverLimit, ShadowOverLimit, UnknownLimit, Denied, Error}

// Config states of the Configs gauge.
const (
	Loaded  = "loaded"
	Invalid = "invalid"
)

var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portico_ratelimit_service_decisions_total",
		Help: "Rate limit decisions: per descriptor by code (ok, over_limit, shadow_over_limit, unknown_limit), per call for denied and error.",
	}, []string{"code"})

	// DecisionSeconds is the time of one ShouldRateLimit call.
	DecisionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "portico_ratelimit_service_decision_seconds",
		Help:    "Time to answer one ShouldRateLimit call, Redis round trip included.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1},
	})

	// OverflowTotal counts descriptors counted in a limit's shared overflow
	// budget because the limit had --max-keys-per-rule client keys.
	OverflowTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "portico_ratelimit_service_overflow_total",
		Help: "Descriptors counted in a limit's shared overflow budget because the limit reached its distinct client keys bound in the window.",
	})

	redisUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "portico_ratelimit_service_redis_up",
		Help: "1 while Redis answers, 0 while it does not (the service answers Unavailable and is not ready).",
	})

	// Configs are the tenant configurations by state: loaded (namespaces
	// with limits in force) and invalid (ConfigMaps refused now; the last
	// good configuration of their namespace stays in force).
	Configs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "portico_ratelimit_service_configs",
		Help: "Tenant configurations: loaded (namespaces whose limits are in force) and invalid (ConfigMaps refused; their namespace keeps its last good configuration).",
	}, []string{"state"})

	// InvalidConfigsTotal counts refused ConfigMap versions.
	InvalidConfigsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "portico_ratelimit_service_invalid_configs_total",
		Help: "ConfigMap versions refused: untrusted labels or name, or data that does not parse.",
	})

	// KeyLoaded is 1 while the token key Secret is loaded.
	KeyLoaded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "portico_ratelimit_service_key_loaded",
		Help: "1 while the token key Secret is loaded; without it every call is denied.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(decisions, DecisionSeconds, OverflowTotal, redisUp, Configs, InvalidConfigsTotal, KeyLoaded)
	for _, c := range Codes {
		decisions.WithLabelValues(string(c))
	}
	Configs.WithLabelValues(Loaded)
	Configs.WithLabelValues(Invalid)
}

// Decided counts n decisions of code.
func Decided(c Code, n int) { decisions.WithLabelValues(string(c)).Add(float64(n)) }

// Decisions is the counter of a code (for tests).
func Decisions(c Code) prometheus.Counter { return decisions.WithLabelValues(string(c)) }

// RedisUp sets the redis_up gauge.
func RedisUp(up bool) {
	if up {
		redisUp.Set(1)
	} else {
		redisUp.Set(0)
	}
}

// RedisUpGauge is the redis_up gauge (for tests).
func RedisUpGauge() prometheus.Gauge { return redisUp }
