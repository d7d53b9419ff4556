package owned_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/portico-dev/portico/internal/owned"
)

// virtualServices is a Proto kind, the kind of object a cache holds
// without its spec (Observe).
var virtualServices = owned.Table{owned.Proto("VirtualService", func(o *networkingv1.VirtualService) proto.Message { return &o.Spec },
	func(l *networkingv1.VirtualServiceList) []*networkingv1.VirtualService { return l.Items })}

func virtualService(hosts []string, headers map[string]string) *networkingv1.VirtualService {
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "vs", Namespace: "ns",
		Labels:      map[string]string{"managed": "yes"},
		Annotations: map[string]string{"theirs": "kept"},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Namespace", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
		}},
	}}
	vs.Spec.Hosts = hosts
	vs.Spec.Http = []*networkingapi.HTTPRoute{{
		Route:   []*networkingapi.HTTPRouteDestination{{Destination: &networkingapi.Destination{Host: "backend"}}},
		Headers: &networkingapi.Headers{Request: &networkingapi.Headers_HeaderOperations{Set: headers}},
	}}
	return vs
}

// observed is what the cache holds of obj: a copy through Observe.
func observed(t *testing.T, obj *networkingv1.VirtualService) *networkingv1.VirtualService {
	t.Helper()
	c := obj.DeepCopy()
	if !virtualServices.Of(c).Observe(c) {
		t.Fatal("a VirtualService was not observed")
	}
	return c
}

// SpecHash must agree with SpecEqual (proto.Equal) on every pair: a hash
// that differs for equal specs costs an update per reconcile, one that is
// equal for different specs would leave an edit unrepaired.
func TestSpecHashAgreesWithSpecEqual(t *testing.T) {
	many := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		many["x-"+k] = k
	}
	manyAgain := map[string]string{}
	for _, k := range []string{"h", "g", "f", "e", "d", "c", "b", "a"} {
		manyAgain["x-"+k] = k
	}
	kind := virtualServices.Of(&networkingv1.VirtualService{})
	for name, tc := range map[string]struct{ a, b *networkingv1.VirtualService }{
		"the same spec":                 {virtualService([]string{"a.example"}, many), virtualService([]string{"a.example"}, many)},
		"a map filled in another order": {virtualService([]string{"a.example"}, many), virtualService([]string{"a.example"}, manyAgain)},
		"nil and empty lists":           {virtualService(nil, nil), virtualService([]string{}, map[string]string{})},
		"another host":                  {virtualService([]string{"a.example"}, nil), virtualService([]string{"evil.example"}, nil)},
		"one more host":                 {virtualService([]string{"a.example"}, nil), virtualService([]string{"a.example", "b.example"}, nil)},
		"hosts in another order":        {virtualService([]string{"a.example", "b.example"}, nil), virtualService([]string{"b.example", "a.example"}, nil)},
		"one header more":               {virtualService(nil, map[string]string{"a": "1"}), virtualService(nil, map[string]string{"a": "1", "b": "2"})},
		"a header's value":              {virtualService(nil, map[string]string{"a": "1"}), virtualService(nil, map[string]string{"a": "2"})},
		"labels and annotations are not the spec": {virtualService(nil, nil), func() *networkingv1.VirtualService {
			v := virtualService(nil, nil)
			v.Labels = nil
			v.Annotations = nil
			return v
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ha, hb := kind.SpecHash(tc.a), kind.SpecHash(tc.b)
			g.Expect(ha).NotTo(BeEmpty())
			g.Expect(ha == hb).To(Equal(kind.SpecEqual(tc.a, tc.b)), "hash %s vs %s", ha, hb)
		})
	}
}

func TestObserveKeepsTheMetadataAndTheHashOnly(t *testing.T) {
	g := NewWithT(t)
	live := virtualService([]string{"a.example"}, map[string]string{"a": "1"})
	live.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	c := observed(t, live)
	g.Expect(c.Spec.Hosts).To(BeEmpty())
	g.Expect(c.Spec.Http).To(BeEmpty())
	g.Expect(c.ManagedFields).To(BeNil())
	g.Expect(c.Labels).To(Equal(live.Labels))
	g.Expect(c.OwnerReferences).To(Equal(live.OwnerReferences))
	g.Expect(c.Annotations).To(HaveKeyWithValue("theirs", "kept"))
	g.Expect(c.Annotations).To(HaveKeyWithValue(owned.ObservedSpec, virtualServices[0].SpecHash(live)))
	g.Expect(live.Annotations).NotTo(HaveKey(owned.ObservedSpec), "Observe changes only the object it is given")
	g.Expect(owned.Table{configMaps[0]}.Of(configMap("cm", true, "x")).Observe(configMap("cm", true, "x"))).
		To(BeFalse(), "a kind without SpecHash is held whole")
}

func TestUpToDateComparesAnObservedCopyByItsHash(t *testing.T) {
	desired := virtualService([]string{"a.example"}, map[string]string{"a": "1"})
	kind := virtualServices.Of(desired)
	for name, tc := range map[string]struct {
		live *networkingv1.VirtualService
		want bool
	}{
		"the desired spec, observed": {live: observed(t, desired), want: true},
		"an edited host, observed":   {live: observed(t, virtualService([]string{"evil.example"}, map[string]string{"a": "1"}))},
		"an edited header, observed": {live: observed(t, virtualService([]string{"a.example"}, map[string]string{"a": "2"}))},
		"the desired spec, observed, without the desired label": {live: func() *networkingv1.VirtualService {
			c := observed(t, desired)
			c.Labels = nil
			return c
		}()},
		// Read past the cache (no ObservedSpec): compared whole.
		"the desired spec, whole": {live: desired.DeepCopy(), want: true},
		"an edited host, whole":   {live: virtualService([]string{"evil.example"}, map[string]string{"a": "1"})},
		"an empty ObservedSpec": {live: func() *networkingv1.VirtualService {
			c := desired.DeepCopy()
			c.Annotations[owned.ObservedSpec] = ""
			return c
		}(), want: true},
		"an observed empty spec": {live: observed(t, virtualService(nil, nil))},
		"a stale ObservedSpec and the desired spec whole": {live: func() *networkingv1.VirtualService {
			c := desired.DeepCopy()
			c.Annotations[owned.ObservedSpec] = kind.SpecHash(virtualService(nil, nil))
			return c
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(owned.UpToDate(kind, desired, tc.live)).To(Equal(tc.want))
		})
	}
}

// An update built on an observed copy sends the whole desired spec at the
// copy's resourceVersion, never the ObservedSpec key, and keeps others'
// labels and annotations.
func TestUpdateFromAnObservedCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(networkingv1.AddToScheme(scheme)).To(Succeed())
	stored := virtualService([]string{"evil.example"}, nil)
	var sent []*networkingv1.VirtualService
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stored).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			sent = append(sent, o.DeepCopyObject().(*networkingv1.VirtualService))
			return c.Update(ctx, o, opts...)
		},
	}).Build()
	w := &owned.Writer{Client: c, Reader: c, Kinds: virtualServices}
	live := &networkingv1.VirtualService{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), live)).To(Succeed())
	live = observed(t, live)
	desired := virtualService([]string{"a.example"}, map[string]string{"a": "1"})
	desired.Annotations = nil

	g.Expect(w.Update(ctx, desired, live)).To(Succeed())
	g.Expect(sent).To(HaveLen(1))
	g.Expect(sent[0].Annotations).NotTo(HaveKey(owned.ObservedSpec))
	g.Expect(sent[0].Annotations).To(HaveKeyWithValue("theirs", "kept"))
	g.Expect(live.Annotations).To(HaveKey(owned.ObservedSpec), "the cached copy is not changed")
	got := &networkingv1.VirtualService{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), got)).To(Succeed())
	g.Expect(proto.Equal(&got.Spec, &desired.Spec)).To(BeTrue(), "spec %v", &got.Spec)

	g.Expect(w.Update(ctx, desired, observed(t, got))).To(Succeed())
	g.Expect(sent).To(HaveLen(1), "an observed copy of the desired spec is up to date")
}
