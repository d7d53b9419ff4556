package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/owned"
)

// The apirule controller caches its VirtualServices as metadata and a hash
// of the spec it read (issue 45). team-b, which may edit the
// VirtualService Portico wrote for its APIRule and write its status, tries
// to make the controller take an edit for the desired spec: it cannot
// store the hash the controller compares, and an edit that claims a
// team-a host is repaired, also while the object's status is one Go
// cannot decode (which the quarantine guard strips before the cache).
func TestAnEditedVirtualServiceIsRepairedWhateverItClaims(t *testing.T) {
	ctx := context.Background()
	create(t, bob, service(teamB, "claims"))
	rule := apiRule(teamB, "claims", "claims.b.example", publicGateway, backend("", "claims"), noAuth("/*"))
	create(t, bob, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
	key := client.ObjectKey{Namespace: teamB, Name: "claims"}
	written := &networkingv1.VirtualService{}
	NewWithT(t).Expect(admin.Get(ctx, key, written)).To(Succeed())
	want := written.Spec.DeepCopy()

	t.Run("team-b cannot store the hash the controller compares", func(t *testing.T) {
		patch := []byte(`{"metadata":{"annotations":{"` + owned.ObservedSpec + `":"forged"}}}`)
		err := bob.Patch(ctx, written.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
		NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the API server stored %q: %v", owned.ObservedSpec, err)
	})
	t.Run("an edit claiming team-a's host, under an undecodable status, is repaired", func(t *testing.T) {
		g := NewWithT(t)
		writePoison(t, poison{gvk: networkingv1.SchemeGroupVersion.WithKind("VirtualService"), name: "claims",
			patch: `{"status":{"observedGeneration":"not-a-number"}}`, path: []string{"status", "observedGeneration"}, want: "not-a-number"})
		var editedVersion string
		g.Eventually(func() error {
			// Unstructured: the status does not decode (the test's clients
			// have no guard).
			vs := &unstructured.Unstructured{}
			vs.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("VirtualService"))
			if err := bob.Get(ctx, key, vs); err != nil {
				return err
			}
			hosts, _, _ := unstructured.NestedStringSlice(vs.Object, "spec", "hosts")
			if err := unstructured.SetNestedStringSlice(vs.Object, append(hosts, "steady.a.example"), "spec", "hosts"); err != nil {
				return err
			}
			vs.SetAnnotations(map[string]string{"portico.dev/observed-spec": "the desired one"})
			if err := bob.Update(ctx, vs); err != nil {
				return err
			}
			editedVersion = vs.GetResourceVersion()
			return nil
		}, eventually, poll).Should(Succeed())
		g.Eventually(func(g Gomega) {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("VirtualService"))
			g.Expect(admin.Get(ctx, key, live)).To(Succeed())
			g.Expect(live.GetResourceVersion()).NotTo(Equal(editedVersion), "not repaired")
			hosts, _, _ := unstructured.NestedStringSlice(live.Object, "spec", "hosts")
			g.Expect(hosts).To(Equal(want.Hosts))
		}, eventually, poll).Should(Succeed())
	})
}
