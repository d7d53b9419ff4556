package config

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/metrics"
	"github.com/portico-dev/portico/internal/globallimit"
)

// Tenant is one namespace's limits, indexed by ID.
type Tenant struct {
	Config globallimit.Config
	limits map[string]globallimit.Limit
}

// NewTenant indexes a Config.
func NewTenant(c globallimit.Config) *Tenant {
	t := &Tenant{Config: c, limits: make(map[string]globallimit.Limit, len(c.Limits))}
	for _, l := range c.Limits {
		t.limits[l.ID] = l
	}
	return t
}

// Limit returns the limit of an ID.
func (t *Tenant) Limit(id string) (globallimit.Limit, bool) {
	l, ok := t.limits[id]
	return l, ok
}

// Trusted returns the Config of a ConfigMap of the feed, or why it is not
// to be trusted or used.
func Trusted(cm *corev1.ConfigMap) (globallimit.Config, error) {
	if got := cm.Labels[globallimit.LabelManagedBy]; got != globallimit.ManagedBy {
		return globallimit.Config{}, fmt.Errorf("label %s is %q, not %q", globallimit.LabelManagedBy, got, globallimit.ManagedBy)
	}
	ns := cm.Labels[globallimit.LabelNamespace]
	if ns == "" {
		return globallimit.Config{}, fmt.Errorf("label %s is missing", globallimit.LabelNamespace)
	}
	if want := globallimit.ConfigMapName(ns); cm.Name != want {
		return globallimit.Config{}, fmt.Errorf("name is not %s, the ConfigMap of namespace %s", want, ns)
	}
	data, ok := cm.Data[globallimit.ConfigData]
	if !ok {
		return globallimit.Config{}, fmt.Errorf("data %s is missing", globallimit.ConfigData)
	}
	c, err := globallimit.Parse(data)
	if err != nil {
		return globallimit.Config{}, err
	}
	if c.Namespace != ns {
		return globallimit.Config{}, fmt.Errorf("data's namespace %q is not label %s %q", c.Namespace, globallimit.LabelNamespace, ns)
	}
	return c, nil
}

// Feed is the current configuration. Its methods are safe for concurrent
// use; readers never wait for an API request.
type Feed struct {
	log logr.Logger

	mu      sync.RWMutex
	tenants map[string]*Tenant
	// invalid holds the ConfigMaps (by name) refused in their current
	// version.
	invalid map[string]bool

	key atomic.Pointer[[]byte]
}

// NewFeed returns an empty feed: no limits, no key.
func NewFeed(log logr.Logger) *Feed {
	return &Feed{log: log, tenants: map[string]*Tenant{}, invalid: map[string]bool{}}
}

// Tenant returns a namespace's limits.
func (f *Feed) Tenant(ns string) (*Tenant, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.tenants[ns]
	return t, ok
}

// Key returns the token key, nil while none is loaded.
func (f *Feed) Key() []byte {
	if k := f.key.Load(); k != nil {
		return *k
	}
	return nil
}

// SetConfigMap applies a ConfigMap's new version.
func (f *Feed) SetConfigMap(cm *corev1.ConfigMap) {
	c, err := Trusted(cm)
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.report()
	if err != nil {
		f.invalid[cm.Name] = true
		metrics.InvalidConfigsTotal.Inc()
		_, kept := f.tenants[cm.Labels[globallimit.LabelNamespace]]
		f.log.Error(err, "ignoring a global rate limit ConfigMap", "configMap", cm.Name, "resourceVersion", cm.ResourceVersion, "keptLastGood", kept)
		return
	}
	delete(f.invalid, cm.Name)
	f.tenants[c.Namespace] = NewTenant(c)
	f.log.V(1).Info("global rate limits loaded", "namespace", c.Namespace, "limits", len(c.Limits))
}

// DeleteConfigMap removes the limits of a deleted ConfigMap's namespace
// (only when it was that namespace's ConfigMap).
func (f *Feed) DeleteConfigMap(cm *corev1.ConfigMap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.report()
	delete(f.invalid, cm.Name)
	ns := cm.Labels[globallimit.LabelNamespace]
	if ns != "" && cm.Name == globallimit.ConfigMapName(ns) {
		delete(f.tenants, ns)
		f.log.V(1).Info("global rate limits removed", "namespace", ns)
	}
}

// report sets the config gauges; f.mu is held.
func (f *Feed) report() {
	metrics.Configs.WithLabelValues(metrics.Loaded).Set(float64(len(f.tenants)))
	metrics.Configs.WithLabelValues(metrics.Invalid).Set(float64(len(f.invalid)))
}

// errNoKey says what is wrong with a key Secret.
var errNoKey = errors.New("data " + globallimit.KeySecretData + " is missing or empty")

// SetSecret applies the key Secret's new version. A Secret without a key
// removes the key: every call is then denied, as the controller's tokens
// cannot be checked.
func (f *Feed) SetSecret(s *corev1.Secret) {
	if s.Name != globallimit.KeySecretName {
		return
	}
	key := s.Data[globallimit.KeySecretData]
	if len(key) == 0 {
		f.log.Error(errNoKey, "the token key Secret holds no key; denying every call", "secret", s.Name)
		f.setKey(nil)
		return
	}
	f.setKey(append([]byte(nil), key...))
}

// DeleteSecret forgets the key.
func (f *Feed) DeleteSecret() {
	f.log.Info("the token key Secret is gone; denying every call", "secret", globallimit.KeySecretName)
	f.setKey(nil)
}

func (f *Feed) setKey(key []byte) {
	if key == nil {
		f.key.Store(nil)
		metrics.KeyLoaded.Set(0)
		return
	}
	f.key.Store(&key)
	metrics.KeyLoaded.Set(1)
}
