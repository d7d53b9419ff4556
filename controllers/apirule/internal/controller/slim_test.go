package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/internal/owned"
)

// The guard slims the watch events of the Istio objects the controller
// labelled to what the cache keeps, with the hash of the spec it decoded;
// the cache's transform then keeps that hash (it cannot compute it again
// from the empty spec). Everything else passes whole.
func TestSlimWatched(t *testing.T) {
	labelled := map[string]string{plan.LabelManagedBy: plan.ManagedBy}
	vs := func(labels map[string]string) *networkingv1.VirtualService {
		v := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: labels}}
		v.Spec.Hosts = []string{"a.example"}
		v.Spec.Http = []*networkingapi.HTTPRoute{{Route: []*networkingapi.HTTPRouteDestination{{Destination: &networkingapi.Destination{Host: "b"}}}}}
		v.Status.ObservedGeneration = 3
		return v
	}
	for name, tc := range map[string]struct {
		obj  runtime.Object
		slim bool
	}{
		"a labelled VirtualService":    {obj: vs(labelled), slim: true},
		"an unlabelled VirtualService": {obj: vs(nil)},
		"another kind, labelled":       {obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Labels: labelled}}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var hash string
			if v, ok := tc.obj.(*networkingv1.VirtualService); ok {
				hash = written.Of(v).SpecHash(v)
			}
			out := SlimWatched(tc.obj)
			if !tc.slim {
				g.Expect(out).To(BeNil())
				return
			}
			v := out.(*networkingv1.VirtualService)
			g.Expect(v.Annotations).To(HaveKeyWithValue(owned.ObservedSpec, hash))
			g.Expect(v.Spec.Hosts).To(BeEmpty())
			g.Expect(v.Status.ObservedGeneration).To(BeZero())
			cached, err := observeIstio(v)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cached.(*networkingv1.VirtualService).Annotations).To(HaveKeyWithValue(owned.ObservedSpec, hash),
				"the cache transform keeps the guard's hash")
		})
	}
}
