package config

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/metrics"
	"github.com/portico-dev/portico/internal/globallimit"
)

const portico = "portico-system"

func tenantConfig(ns string, requests int64) globallimit.Config {
	return globallimit.Config{Namespace: ns, Limits: []globallimit.Limit{
		{ID: "api/r", Requests: requests, Unit: globallimit.Minute, Algorithm: globallimit.FixedWindow},
	}}
}

type cmOption func(*corev1.ConfigMap)

func withLabel(k, v string) cmOption { return func(cm *corev1.ConfigMap) { cm.Labels[k] = v } }
func withoutLabel(k string) cmOption { return func(cm *corev1.ConfigMap) { delete(cm.Labels, k) } }
func withName(n string) cmOption     { return func(cm *corev1.ConfigMap) { cm.Name = n } }
func withData(d string) cmOption {
	return func(cm *corev1.ConfigMap) { cm.Data[globallimit.ConfigData] = d }
}

// newConfigMap is the controller's ConfigMap of c.
func newConfigMap(c globallimit.Config, opts ...cmOption) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      globallimit.ConfigMapName(c.Namespace),
			Namespace: portico,
			Labels: map[string]string{
				globallimit.LabelConfig:    "true",
				globallimit.LabelNamespace: c.Namespace,
				globallimit.LabelManagedBy: globallimit.ManagedBy,
			},
		},
		Data: map[string]string{globallimit.ConfigData: c.Marshal()},
	}
	for _, o := range opts {
		o(cm)
	}
	return cm
}

func TestTrusted(t *testing.T) {
	good := tenantConfig("team-a", 10)
	cases := map[string]struct {
		cm      *corev1.ConfigMap
		wantErr string
	}{
		"the controller's":       {newConfigMap(good), ""},
		"another writer":         {newConfigMap(good, withLabel(globallimit.LabelManagedBy, "someone")), "managed-by"},
		"no writer":              {newConfigMap(good, withoutLabel(globallimit.LabelManagedBy)), "managed-by"},
		"no namespace label":     {newConfigMap(good, withoutLabel(globallimit.LabelNamespace)), "is missing"},
		"label names another":    {newConfigMap(good, withLabel(globallimit.LabelNamespace, "team-b")), "name is not"},
		"data names another":     {newConfigMap(good, withName(globallimit.ConfigMapName("team-b")), withLabel(globallimit.LabelNamespace, "team-b")), `data's namespace "team-a" is not`},
		"name is not the tenant": {newConfigMap(good, withName("portico-global-ratelimit-0000000000")), "name is not"},
		"no data":                {newConfigMap(good, func(cm *corev1.ConfigMap) { cm.Data = nil }), "is missing"},
		"not JSON":               {newConfigMap(good, withData("{")), "decode"},
		"unknown field":          {newConfigMap(good, withData(`{"namespace":"team-a","limits":[],"extra":1}`)), "unknown field"},
		"invalid limit":          {newConfigMap(good, withData(`{"namespace":"team-a","limits":[{"id":"x","requests":0,"unit":"MINUTE","algorithm":"FixedWindow"}]}`)), "out of range"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := Trusted(tc.cm)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(Equal(good))
		})
	}
}

func limitOf(g Gomega, f *Feed, ns string) int64 {
	tenant, ok := f.Tenant(ns)
	g.Expect(ok).To(BeTrue(), "namespace %s has limits", ns)
	l, ok := tenant.Limit("api/r")
	g.Expect(ok).To(BeTrue())
	return l.Requests
}

func TestFeedKeepsTheLastGoodConfig(t *testing.T) {
	g := NewWithT(t)
	f := NewFeed(logr.Discard())
	f.SetConfigMap(newConfigMap(tenantConfig("team-a", 10)))
	g.Expect(limitOf(g, f, "team-a")).To(Equal(int64(10)))
	g.Expect(testutil.ToFloat64(metrics.Configs.WithLabelValues(metrics.Loaded))).To(Equal(1.0))

	invalidBefore := testutil.ToFloat64(metrics.InvalidConfigsTotal)
	f.SetConfigMap(newConfigMap(tenantConfig("team-a", 10), withData("{")))
	g.Expect(limitOf(g, f, "team-a")).To(Equal(int64(10)), "bad input loses nothing")
	g.Expect(testutil.ToFloat64(metrics.InvalidConfigsTotal) - invalidBefore).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(metrics.Configs.WithLabelValues(metrics.Invalid))).To(Equal(1.0))

	// Another tenant's ConfigMap cannot replace team-a's limits.
	f.SetConfigMap(newConfigMap(tenantConfig("team-a", 1000), withName(globallimit.ConfigMapName("team-b")), withLabel(globallimit.LabelNamespace, "team-b")))
	g.Expect(limitOf(g, f, "team-a")).To(Equal(int64(10)))
	_, ok := f.Tenant("team-b")
	g.Expect(ok).To(BeFalse())

	f.SetConfigMap(newConfigMap(tenantConfig("team-a", 20)))
	g.Expect(limitOf(g, f, "team-a")).To(Equal(int64(20)))
	g.Expect(testutil.ToFloat64(metrics.Configs.WithLabelValues(metrics.Invalid))).To(Equal(1.0), "team-b's is still refused")

	// Deleting a ConfigMap that is not the tenant's removes nothing.
	f.DeleteConfigMap(newConfigMap(tenantConfig("team-a", 20), withName("something-else")))
	g.Expect(limitOf(g, f, "team-a")).To(Equal(int64(20)))
	f.DeleteConfigMap(newConfigMap(tenantConfig("team-a", 20)))
	_, ok = f.Tenant("team-a")
	g.Expect(ok).To(BeFalse())
}

func TestFeedKey(t *testing.T) {
	g := NewWithT(t)
	f := NewFeed(logr.Discard())
	g.Expect(f.Key()).To(BeNil())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: globallimit.KeySecretName, Namespace: portico},
		Data:       map[string][]byte{globallimit.KeySecretData: []byte("k1")},
	}
	f.SetSecret(secret)
	g.Expect(f.Key()).To(Equal([]byte("k1")))
	g.Expect(testutil.ToFloat64(metrics.KeyLoaded)).To(Equal(1.0))

	other := secret.DeepCopy()
	other.Name = "other"
	other.Data[globallimit.KeySecretData] = []byte("k2")
	f.SetSecret(other)
	g.Expect(f.Key()).To(Equal([]byte("k1")), "only the key Secret counts")

	empty := secret.DeepCopy()
	empty.Data = nil
	f.SetSecret(empty)
	g.Expect(f.Key()).To(BeNil())
	g.Expect(testutil.ToFloat64(metrics.KeyLoaded)).To(Equal(0.0))

	f.SetSecret(secret)
	f.DeleteSecret()
	g.Expect(f.Key()).To(BeNil())
}

func TestWatch(t *testing.T) {
	g := NewWithT(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: globallimit.KeySecretName, Namespace: portico},
		Data:       map[string][]byte{globallimit.KeySecretData: []byte("k1")},
	}
	cs := fake.NewClientset(newConfigMap(tenantConfig("team-a", 10)), secret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := NewFeed(logr.Discard())
	synced, err := Watch(ctx, cs, portico, f)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(synced).Should(BeTrue())
	g.Expect(limitOf(g, f, "team-a")).To(Equal(int64(10)))
	g.Expect(f.Key()).To(Equal([]byte("k1")))

	// Changes apply without a restart.
	_, err = cs.CoreV1().ConfigMaps(portico).Update(ctx, newConfigMap(tenantConfig("team-a", 30)), metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(limitOf(g, f, "team-a")).To(Equal(int64(30))) }).Should(Succeed())

	g.Expect(cs.CoreV1().Secrets(portico).Delete(ctx, secret.Name, metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(f.Key).Should(BeNil())
	g.Expect(cs.CoreV1().ConfigMaps(portico).Delete(ctx, globallimit.ConfigMapName("team-a"), metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() bool { _, ok := f.Tenant("team-a"); return ok }).Should(BeFalse())
}
