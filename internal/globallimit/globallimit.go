package globallimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The rate-limit service's Service, in Portico's namespace.
const (
	// ServiceName is the Service (and Deployment) of the rate-limit service.
	ServiceName = "portico-ratelimit-service"
	// GRPCPort serves Envoy's RateLimitService v3 API.
	GRPCPort = 8081
	// GRPCPortName makes Istio treat the port as gRPC (HTTP/2).
	GRPCPortName = "grpc-rls"
)

// ClusterName is the Envoy cluster Istio builds for the service's gRPC
// port in namespace ns: the gateways' rate limit filters call it.
func ClusterName(ns string) string {
	return fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", GRPCPort, ServiceName, ns)
}

// Host is the service's DNS name and port in namespace ns.
func Host(ns string) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local:%d", ServiceName, ns, GRPCPort)
}

// Descriptor entry keys the filters send before a rule's client keys.
const (
	// TokenKey is the first entry of every descriptor: its value is
	// Token(key, namespace of the domain).
	TokenKey = "portico_token"
	// LimitKey is the second entry: its value is LimitID(RateLimit, rule).
	LimitKey = "portico_limit"
	// MatchKey is the entry of a rule's match (header_value_match).
	MatchKey = "portico_match"
	// HeaderKeyPrefix, ClientAddressKey and ClaimKeyPrefix name the client
	// key entries; a header's name and a claim's issuer and name follow
	// the prefix.
	HeaderKeyPrefix  = "header:"
	ClientAddressKey = "remote_address"
	ClaimKeyPrefix   = "claim:"
)

// domainPrefix starts every domain Portico writes.
const domainPrefix = "portico/"

// Domain is the rate limit domain of the RateLimits of namespace ns.
func Domain(ns string) string { return domainPrefix + ns }

// NamespaceOf returns the namespace of a domain Portico writes.
func NamespaceOf(domain string) (string, bool) {
	ns, ok := strings.CutPrefix(domain, domainPrefix)
	return ns, ok && ns != "" && !strings.Contains(ns, "/")
}

// Token is the token of namespace ns under key: hex of HMAC-SHA256, 32
// characters (128 bits).
func Token(key []byte, ns string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("portico-global-ratelimit/" + ns))
	return hex.EncodeToString(mac.Sum(nil))[:32]
}

// ValidToken reports, in constant time, whether token is namespace ns's.
func ValidToken(key []byte, ns, token string) bool {
	return len(key) > 0 && hmac.Equal([]byte(Token(key, ns)), []byte(token))
}

// The key Secret, in Portico's namespace, that the ratelimit controller
// creates once with random bytes and the service reads.
const (
	KeySecretName = "portico-ratelimit-key"
	KeySecretData = "key"
	// KeyBytes is the length of a new key.
	KeyBytes = 32
)

// LimitID names a rule of a RateLimit in its namespace's domain.
func LimitID(rateLimit, rule string) string { return rateLimit + "/" + rule }

// The ConfigMaps of the feed, in Portico's namespace.
const (
	// LabelConfig marks the ConfigMaps of the feed.
	LabelConfig = "gateway.portico.dev/global-ratelimit-config"
	// LabelNamespace names the tenant namespace a ConfigMap configures.
	LabelNamespace = "gateway.portico.dev/ratelimit-namespace"
	// LabelManagedBy and ManagedBy mark the writer.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "ratelimit-controller"
	// ConfigData is the ConfigMap key holding the JSON Config.
	ConfigData = "config.json"
)

// ConfigMapName is the ConfigMap of namespace ns's limits.
func ConfigMapName(ns string) string {
	sum := sha256.Sum256([]byte(ns))
	return "portico-global-ratelimit-" + hex.EncodeToString(sum[:])[:10]
}

// Unit is a limit's unit of time, as RateLimitService v3 names them.
type Unit string

// The units.
const (
	Second Unit = "SECOND"
	Minute Unit = "MINUTE"
	Hour   Unit = "HOUR"
	Day    Unit = "DAY"
)

// Seconds is the unit's length.
func (u Unit) Seconds() int64 {
	switch u {
	case Second:
		return 1
	case Minute:
		return 60
	case Hour:
		return 3600
	case Day:
		return 86400
	}
	return 0
}

// Algorithm is how a budget refills.
type Algorithm string

// The algorithms.
const (
	FixedWindow Algorithm = "FixedWindow"
	TokenBucket Algorithm = "TokenBucket"
)

// Config is the limits of one tenant namespace's domain.
type Config struct {
	// Namespace the limits belong to; the domain is Domain(Namespace).
	Namespace string `json:"namespace"`
	// Limits by ID, sorted by ID.
	Limits []Limit `json:"limits"`
}

// Limit is one rule's budget.
type Limit struct {
	// ID is LimitID(RateLimit, rule): the value of the descriptor's
	// LimitKey entry.
	ID string `json:"id"`
	// Requests per Unit (per distinct client key).
	Requests int64 `json:"requests"`
	Unit     Unit  `json:"unit"`
	// Algorithm is FixedWindow or TokenBucket.
	Algorithm Algorithm `json:"algorithm"`
	// Burst is the token bucket's capacity (TokenBucket); Requests when 0.
	Burst int64 `json:"burst,omitempty"`
	// Shadow counts without refusing: the service answers OK and records
	// what it would have refused.
	Shadow bool `json:"shadow,omitempty"`
	// Headers returns the limit's figures (current limit, remaining,
	// reset) with each decision, from which the gateway writes
	// X-RateLimit-* response headers.
	Headers bool `json:"headers,omitempty"`
}

// Capacity is a token bucket's size.
func (l Limit) Capacity() int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Requests
}

// maxRequests bounds Requests and Burst, as the RateLimit CRD does.
const maxRequests = 1_000_000_000

// Validate reports what makes a Config unusable.
func (c Config) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace is empty"))
	}
	seen := map[string]bool{}
	for _, l := range c.Limits {
		switch {
		case l.ID == "":
			errs = append(errs, errors.New("a limit has no id"))
		case seen[l.ID]:
			errs = append(errs, fmt.Errorf("limit %q: listed twice", l.ID))
		}
		seen[l.ID] = true
		if l.Requests < 1 || l.Requests > maxRequests || l.Burst < 0 || l.Burst > maxRequests {
			errs = append(errs, fmt.Errorf("limit %q: requests %d or burst %d out of range", l.ID, l.Requests, l.Burst))
		}
		if l.Unit.Seconds() == 0 {
			errs = append(errs, fmt.Errorf("limit %q: unknown unit %q", l.ID, l.Unit))
		}
		if l.Algorithm != FixedWindow && l.Algorithm != TokenBucket {
			errs = append(errs, fmt.Errorf("limit %q: unknown algorithm %q", l.ID, l.Algorithm))
		}
	}
	return errors.Join(errs...)
}

// Marshal is the ConfigMap data of a Config: deterministic JSON.
func (c Config) Marshal() string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // plain data
	}
	return string(b)
}

// Parse reads and validates ConfigMap data.
func Parse(data string) (Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("decode %s: %w", ConfigData, err)
	}
	return c, c.Validate()
}
