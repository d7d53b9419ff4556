package quarantine

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// A controller-runtime cache on a guarded config whose Handoff names the
// kinds it watches holds, on a real API server, exactly the objects the API
// server stores (through its initial streamed list and later events),
// still without the objects that do not decode; and nobody can store an
// object that claims to be a placeholder.
func TestHandoffCacheHoldsTheStoredObjects(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	tn := setUpTenant(t, ctx, env.Config)

	// The attack: a tenant's object carrying the placeholder's annotation,
	// to have the cache take another object in its place. The API server
	// refuses the key.
	forged := newAPIRule("forged")
	forged.Annotations = map[string]string{HandedOff: "1"}
	forged.Namespace = tn.ns
	err := tn.raw.Create(ctx, forged)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("metadata.annotations"))

	h := NewHandoff(apiRuleGVK, virtualServiceGVK, gatewayGVK)
	// A transform that fails makes the informer list again, past the
	// handoff: count the failures, which must not happen.
	transform, failed := h.Transform(cache.TransformStripManagedFields()), &atomic.Int64{}
	guarded := rest.CopyConfig(env.Config)
	guarded.Wrap(New(env.Scheme, Options{Handoff: h, WithoutManagedFields: true}).Wrap)
	mgr := startManager(t, ctx, guarded, cache.Options{DefaultTransform: func(obj any) (any, error) {
		out, err := transform(obj)
		if err != nil {
			failed.Add(1)
		}
		return out, err
	}})
	for _, obj := range []client.Object{&porticov1alpha1.APIRule{}, &networkingv1.VirtualService{}} {
		_, err := mgr.GetCache().GetInformer(ctx, obj) // returns once synced: the streamed list, handed off
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(h.handedOff()).To(BeNumerically(">=", 2), "the streamed list handed nothing off")
	listed := h.handedOff()

	// Events after the sync: an APIRule created, another's spec changed.
	tn.create(newAPIRule("late-rule"))
	tn.patch(apiRuleGVK, "good-rule", `{"spec":{"rules":[{"path":"/api/*","noAuth":true},{"path":"/health","noAuth":true}]}}`, false)

	// asStored is an object of the cache as JSON, beside the same object
	// read from the API server past the guard, without managed fields.
	asStored := func(cached client.Object) (string, string) {
		stored := cached.DeepCopyObject().(client.Object)
		if err := tn.raw.Get(ctx, client.ObjectKeyFromObject(cached), stored); err != nil {
			return "", err.Error()
		}
		stored.SetManagedFields(nil)
		stored.GetObjectKind().SetGroupVersionKind(cached.GetObjectKind().GroupVersionKind())
		a, _ := json.Marshal(cached)
		b, _ := json.Marshal(stored)
		return string(a), string(b)
	}
	g.Eventually(func(g Gomega) {
		var rules porticov1alpha1.APIRuleList
		g.Expect(mgr.GetCache().List(ctx, &rules, client.InNamespace(tn.ns))).To(Succeed())
		names := map[string]int{}
		for i := range rules.Items {
			r := &rules.Items[i]
			names[r.Name] = len(r.Spec.Rules)
			if r.Name == "bad-rule" { // its status does not decode: the guard removed it
				g.Expect(r.Status.Conditions).To(BeEmpty())
				continue
			}
			cached, stored := asStored(r)
			g.Expect(cached).To(Equal(stored))
		}
		g.Expect(names).To(Equal(map[string]int{"good-rule": 2, "bad-rule": 1, "late-rule": 1}))

		var vss networkingv1.VirtualServiceList
		g.Expect(mgr.GetCache().List(ctx, &vss, client.InNamespace(tn.ns))).To(Succeed())
		var vsNames []string
		for _, vs := range vss.Items {
			vsNames = append(vsNames, vs.Name)
			if vs.Name == "good-vs" {
				cached, stored := asStored(vs)
				g.Expect(cached).To(Equal(stored))
			}
		}
		// broken-vs does not decode: left out.
		g.Expect(vsNames).To(ConsistOf("good-vs", "bad-vs"))
	}, safety).Should(Succeed())
	g.Eventually(h.holding, safety).Should(BeZero(), "objects held that no cache took")
	g.Expect(h.handedOff()-listed).To(BeNumerically(">=", 2), "the events after the sync handed nothing off")
	g.Expect(failed.Load()).To(BeZero(), "placeholders whose object the transform did not find")
}
