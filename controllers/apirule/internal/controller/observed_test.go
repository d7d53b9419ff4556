package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/internal/owned"
)

// The cache holds the VirtualServices the controller wrote without their
// spec and status: their metadata and the hash of the spec the API server
// sent, computed as they entered the cache. An edit of the spec is
// repaired whatever annotations and labels the editor keeps or adds, and
// no stored object can carry the hash the cache compares.
func TestOwnedIstioObjectsAreCachedWithoutSpec(t *testing.T) {
	ctx := context.Background()
	createService(t, "observed")
	createAPIRule(t, "observed", "observed", health, orders)
	objs := []client.Object{&networkingv1.VirtualService{}}

	t.Run("policies are cached whole: the access conflict check reads them", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			for _, obj := range []client.Object{&securityv1.AuthorizationPolicy{}, &securityv1.RequestAuthentication{}} {
				live, inCache := obj.DeepCopyObject().(client.Object), obj.DeepCopyObject().(client.Object)
				get(g, "observed", live)
				g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(live), inCache)).To(Succeed())
				g.Expect(inCache.GetAnnotations()).NotTo(HaveKey(owned.ObservedSpec))
				g.Expect(written.Of(live).SpecEqual(inCache, live)).To(BeTrue())
			}
		}, eventually).Should(Succeed())
	})

	t.Run("a VirtualService is cached as its metadata and the hash of its live spec", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			for _, obj := range objs {
				live, inCache := obj.DeepCopyObject().(client.Object), obj.DeepCopyObject().(client.Object)
				get(g, "observed", live)
				g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(live), inCache)).To(Succeed())
				kind := written.Of(live)
				g.Expect(inCache.GetResourceVersion()).To(Equal(live.GetResourceVersion()))
				g.Expect(inCache.GetAnnotations()).To(HaveKeyWithValue(owned.ObservedSpec, kind.SpecHash(live)), kind.Name)
				g.Expect(inCache.GetOwnerReferences()).To(Equal(live.GetOwnerReferences()))
				g.Expect(inCache.GetLabels()).To(Equal(live.GetLabels()))
				g.Expect(inCache.GetManagedFields()).To(BeEmpty())
				empty := kind.New()
				g.Expect(kind.SpecEqual(inCache, empty)).To(BeTrue(), "%s: the cache holds a spec", kind.Name)
				g.Expect(kind.SpecEqual(live, empty)).To(BeFalse(), "%s: the live spec is empty", kind.Name)
			}
			vs := &networkingv1.VirtualService{}
			g.Expect(cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "observed"}, vs)).To(Succeed())
			g.Expect(proto.Size(&vs.Status)).To(BeZero(), "the cache holds a status")
		}, eventually).Should(Succeed())
	})

	t.Run("no stored object can carry the observed hash", func(t *testing.T) {
		g := NewWithT(t)
		for _, obj := range objs {
			patch := []byte(`{"metadata":{"annotations":{"` + owned.ObservedSpec + `":"forged"}}}`)
			live := obj.DeepCopyObject().(client.Object)
			get(g, "observed", live)
			err := k8sClient.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch))
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%T: the API server stored %q: %v", obj, owned.ObservedSpec, err)
		}
	})

	for _, obj := range objs {
		kind := written.Of(obj)
		t.Run("a spec edit of the "+kind.Name+" that keeps every annotation and label is repaired", func(t *testing.T) {
			g := NewWithT(t)
			before := obj.DeepCopyObject().(client.Object)
			get(g, "observed", before)
			var editedVersion string
			g.Eventually(func() error {
				edited := obj.DeepCopyObject().(client.Object)
				if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "observed"}, edited); err != nil {
					return err
				}
				kind.ClearSpec(edited)
				annotations := edited.GetAnnotations()
				if annotations == nil {
					annotations = map[string]string{}
				}
				annotations["portico.dev/observed-spec"] = kind.SpecHash(before)
				edited.SetAnnotations(annotations)
				if err := k8sClient.Update(ctx, edited, client.FieldOwner("kubectl-edit")); err != nil {
					return err
				}
				editedVersion = edited.GetResourceVersion()
				return nil
			}, eventually).Should(Succeed())
			g.Eventually(func(g Gomega) {
				live := obj.DeepCopyObject().(client.Object)
				get(g, "observed", live)
				g.Expect(live.GetResourceVersion()).NotTo(Equal(editedVersion), "%s not repaired", kind.Name)
				g.Expect(kind.SpecEqual(live, before)).To(BeTrue(), "%s not repaired", kind.Name)
				g.Expect(live.GetAnnotations()).To(HaveKey("portico.dev/observed-spec"), "others' annotations stay")
			}, eventually).Should(Succeed())
		})
	}
}

// A labelled look-alike whose spec is exactly the one the controller
// wants (so its observed hash is the desired one) is still another's: it
// is reported, never adopted nor written.
func TestALookAlikeWithTheDesiredSpecIsNeverAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createService(t, "twin")
	// What the controller writes for the APIRule, taken before it exists.
	first := createAPIRule(t, "twin", "twin", health, orders)
	model := &networkingv1.VirtualService{}
	g.Eventually(func(g Gomega) { get(g, "twin", model) }, eventually).Should(Succeed())
	g.Expect(k8sClient.Delete(ctx, first)).To(Succeed())
	g.Eventually(gone("twin", &porticov1alpha1.APIRule{}), eventually).Should(BeTrue())
	g.Eventually(gone("twin", &networkingv1.VirtualService{}), eventually).Should(BeTrue())

	lookAlike := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "twin", Namespace: ns, Labels: map[string]string{
		plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "twin", plan.LabelAPIRuleNamespace: ns,
	}}}
	proto.Merge(&lookAlike.Spec, &model.Spec)
	g.Expect(k8sClient.Create(ctx, lookAlike, client.FieldOwner("admin"))).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, lookAlike) })

	createAPIRule(t, "twin", "twin", health, orders)
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, "twin")
		g.Expect(c.Reason).To(Equal(porticov1alpha1.ReasonConflict))
		g.Expect(c.Message).To(ContainSubstring("VirtualService shop/twin exists"))
	}, eventually).Should(Succeed())
	inCache := &networkingv1.VirtualService{}
	g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(lookAlike), inCache)).To(Succeed())
	g.Expect(inCache.Annotations).To(HaveKeyWithValue(owned.ObservedSpec, written.Of(model).SpecHash(model)),
		"the look-alike's observed hash is the desired spec's")
	g.Consistently(func(g Gomega) {
		live := &networkingv1.VirtualService{}
		get(g, "twin", live)
		g.Expect(live.ResourceVersion).To(Equal(lookAlike.ResourceVersion), "the look-alike was written")
		g.Expect(live.OwnerReferences).To(BeEmpty())
	}, "2s").Should(Succeed())
}
