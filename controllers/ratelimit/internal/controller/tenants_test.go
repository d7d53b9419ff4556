package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
)

// The writes are split by RateLimit namespace, the cheapest first, so a
// tenant with one small filter does not wait for another's large one.
func TestTenantsOf(t *testing.T) {
	filter := func(ns, tenant string, patches int) *networkingv1alpha3.EnvoyFilter {
		ef := &networkingv1alpha3.EnvoyFilter{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "f-" + tenant, Labels: map[string]string{topology.LabelNamespace: tenant}}}
		for range patches {
			ef.Spec.ConfigPatches = append(ef.Spec.ConfigPatches, &networkingapi.EnvoyFilter_EnvoyConfigObjectPatch{})
		}
		return ef
	}
	limit := func(ns, name string) gatewayv1alpha1.RateLimit {
		return gatewayv1alpha1.RateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	filters := []*networkingv1alpha3.EnvoyFilter{
		filter("istio-system", "team-b", 500), // team-b's pods run in the root namespace
		filter("team-a", "team-a", 3),
		filter("team-c", "team-c", 3),
	}
	limits := []gatewayv1alpha1.RateLimit{limit("team-b", "b1"), limit("team-b", "b2"), limit("team-a", "a1"), limit("team-c", "c1"), limit("team-d", "d1")}
	got := tenantsOf(filters, limits, nil)

	g := NewWithT(t)
	var order []string
	for _, tn := range got {
		order = append(order, tn.namespace)
	}
	g.Expect(order).To(Equal([]string{"team-d", "team-a", "team-c", "team-b"}), "cheapest first, then by name")
	g.Expect(got[3].filters).To(ConsistOf(filters[0]), "a filter goes with the namespace whose RateLimits it holds, wherever it is written")
	g.Expect(got[3].limits).To(HaveLen(2))
	g.Expect(got[0].filters).To(BeEmpty(), "a namespace whose limits need no filter still gets its statuses")
}

// converge reconciles World, then the work of every tenant it computed, as
// the controller's workers would.
func converge(ctx context.Context, r *Reconciler) error {
	if _, err := r.Reconcile(ctx, World); err != nil {
		return err
	}
	var errs []error
	for _, ns := range r.work.namespaces() {
		_, err := r.Reconcile(ctx, tenantRequest(ns))
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// A tenant's write in flight holds up neither the world nor another
// tenant's work (issue 45): while the noisy tenant's status write hangs,
// the world is computed again and the quiet tenant's filter and status are
// written. Before the split, the one World reconcile wrote every tenant
// and the quiet one waited for the noisy one's writes.
func TestATenantsSlowWriteHoldsUpNoOther(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c := fakeClient(t, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if obj.GetNamespace() == "team-noisy" {
				once.Do(func() { close(entered) })
				<-release
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	},
		gatewayIn(topology.DefaultRootNamespace, "public", ingress),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: topology.DefaultRootNamespace, Name: "ingressgateway-1", Labels: ingress}},
		apiRule("team-noisy", "orders", topology.DefaultRootNamespace+"/public", "/orders/*"),
		apiRule("team-quiet", "carts", topology.DefaultRootNamespace+"/public", "/carts/*"),
		rateLimit("team-noisy", "orders", gatewayv1alpha1.TargetAPIRule, "orders", 100),
	)
	r := &Reconciler{Client: c, Reader: c, GatewaysKnown: true, APIRulesKnown: true, RootNamespace: topology.DefaultRootNamespace}
	_, err := r.Reconcile(ctx, World)
	g.Expect(err).NotTo(HaveOccurred())
	noisyDone := make(chan error, 1)
	go func() {
		_, err := r.Reconcile(ctx, tenantRequest("team-noisy"))
		noisyDone <- err
	}()
	<-entered

	g.Expect(c.Create(ctx, rateLimit("team-quiet", "carts", gatewayv1alpha1.TargetAPIRule, "carts", 10))).To(Succeed())
	done := make(chan error, 1)
	go func() {
		if _, err := r.Reconcile(ctx, World); err != nil {
			done <- err
			return
		}
		_, err := r.Reconcile(ctx, tenantRequest("team-quiet"))
		done <- err
	}()
	select {
	case err := <-done:
		g.Expect(err).NotTo(HaveOccurred())
	case <-time.After(30 * time.Second):
		t.Fatal("the quiet tenant's work waited for the noisy tenant's write")
	}
	quiet := &gatewayv1alpha1.RateLimit{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-quiet", Name: "carts"}, quiet)).To(Succeed())
	g.Expect(meta.FindStatusCondition(quiet.Status.Conditions, gatewayv1alpha1.ConditionReady)).To(HaveField("Reason", gatewayv1alpha1.ReasonEnforced))
	var filters networkingv1alpha3.EnvoyFilterList
	g.Expect(c.List(ctx, &filters, client.MatchingLabels{topology.LabelNamespace: "team-quiet"})).To(Succeed())
	g.Expect(filters.Items).To(HaveLen(1), "the quiet tenant's filter is written")

	close(release)
	g.Expect(<-noisyDone).NotTo(HaveOccurred())
}

// A tenant's key does nothing before the first world (it would otherwise
// remove every live filter as unneeded), and after one it removes the live
// filters of a namespace the world has no work for.
func TestTenantWorkRemovesOnlyAfterAWorld(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stray := &networkingv1alpha3.EnvoyFilter{ObjectMeta: metav1.ObjectMeta{Namespace: "team-gone", Name: "ratelimit-old",
		Labels: map[string]string{topology.LabelManagedBy: topology.ManagedBy, topology.LabelNamespace: "team-gone"}}}
	c := fakeClient(t, interceptor.Funcs{}, stray)
	r := &Reconciler{Client: c, Reader: c, GatewaysKnown: true, APIRulesKnown: true, RootNamespace: topology.DefaultRootNamespace}
	key := client.ObjectKeyFromObject(stray)

	_, err := r.Reconcile(ctx, tenantRequest("team-gone"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(ctx, key, &networkingv1alpha3.EnvoyFilter{})).To(Succeed(), "no world yet: nothing removed")

	g.Expect(converge(ctx, r)).To(Succeed())
	g.Expect(r.work.namespaces()).To(ConsistOf("team-gone"), "the world hands the namespace of a live filter its (empty) work")
	g.Expect(apierrors.IsNotFound(c.Get(ctx, key, &networkingv1alpha3.EnvoyFilter{}))).To(BeTrue(), "no policy needs it: removed")
}
