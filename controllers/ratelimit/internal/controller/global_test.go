package controller

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/globallimit"
)

func globalRateLimit(ns, name, gateway string) *gatewayv1alpha1.RateLimit {
	l := rateLimit(ns, name, gatewayv1alpha1.TargetGateway, gateway, 1)
	l.Spec.Local = nil
	l.Spec.Global = &gatewayv1alpha1.GlobalRateLimit{Rules: []gatewayv1alpha1.GlobalRule{
		{Name: "per-key", Requests: 3, Unit: gatewayv1alpha1.UnitMinute, ClientKeys: []gatewayv1alpha1.ClientKey{{Type: gatewayv1alpha1.ClientKeyHeader, Header: "x-api-key"}}},
	}}
	return l
}

// A global RateLimit becomes the tenant's filter, with its domain and
// token, and the tenant's limits in the rate-limit service's feed; the feed
// is repaired when changed and removed when no RateLimit needs it.
func TestGlobalRateLimitFeedsTheService(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	selector := map[string]string{"app": "team-g-gateway"}
	create(t, gatewayIn("team-g", "edge", selector))
	gatewayPod(t, "team-g", "edge-0", selector)
	limit := globalRateLimit("team-g", "global", "edge")
	create(t, limit)

	g.Eventually(func(g Gomega) {
		g.Expect(verdict(g, "team-g", "global").Reason).To(Equal(gatewayv1alpha1.ReasonEnforced))
	}, eventually).Should(Succeed())

	secret := &corev1.Secret{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: porticoNamespace, Name: globallimit.KeySecretName}, secret)).To(Succeed())
	key := secret.Data[globallimit.KeySecretData]
	g.Expect(key).To(HaveLen(globallimit.KeyBytes))

	cmKey := client.ObjectKey{Namespace: porticoNamespace, Name: globallimit.ConfigMapName("team-g")}
	want := globallimit.Config{Namespace: "team-g", Limits: []globallimit.Limit{{ID: "global/per-key", Requests: 3, Unit: globallimit.Minute, Algorithm: globallimit.FixedWindow}}}
	feed := func(g Gomega) globallimit.Config {
		cm := &corev1.ConfigMap{}
		g.Expect(k8sClient.Get(ctx, cmKey, cm)).To(Succeed())
		g.Expect(cm.Labels).To(HaveKeyWithValue(globallimit.LabelNamespace, "team-g"))
		c, err := globallimit.Parse(cm.Data[globallimit.ConfigData])
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	g.Eventually(feed, eventually).Should(Equal(want))

	ef, _ := envoyFilterIn(g, "team-g", "team-g", selector)
	raw, err := json.Marshal(&ef.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(And(ContainSubstring(`"domain":"portico/team-g"`), ContainSubstring(globallimit.Token(key, "team-g"))))

	// Someone edits the feed: the controller puts it back.
	cm := &corev1.ConfigMap{}
	g.Expect(k8sClient.Get(ctx, cmKey, cm)).To(Succeed())
	cm.Data[globallimit.ConfigData] = `{"namespace":"team-g","limits":[]}`
	g.Expect(k8sClient.Update(ctx, cm)).To(Succeed())
	g.Eventually(feed, eventually).Should(Equal(want))

	g.Expect(k8sClient.Delete(ctx, limit)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, cmKey, &corev1.ConfigMap{})) }, eventually).Should(BeTrue(),
		"a namespace without global rules has no limits in the service")
}
