package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func apiRuleIn(t *testing.T, namespace, name string, hosts []porticov1alpha1.Hostname, svc string, rules ...porticov1alpha1.Rule) *porticov1alpha1.APIRule {
	t.Helper()
	if len(rules) == 0 {
		rules = []porticov1alpha1.Rule{{Path: "/*", NoAuth: ptr.To(true)}}
	}
	r := &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts: hosts, Gateway: "istio-system/public",
			Service: &porticov1alpha1.ServiceReference{Name: svc, Port: 8080}, Rules: rules,
		},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), r)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), r) })
	return r
}

// afterCreation waits until the clock has left the second obj was created
// in: claims are ordered by creationTimestamp, which counts whole seconds,
// and within one second by namespace and name.
func afterCreation(t *testing.T, obj client.Object) {
	t.Helper()
	live := &porticov1alpha1.APIRule{}
	NewWithT(t).Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), live)).To(Succeed())
	time.Sleep(time.Until(live.CreationTimestamp.Add(time.Second)))
}

func readyIn(g Gomega, namespace, name string) *metav1.Condition {
	r := &porticov1alpha1.APIRule{}
	getIn(g, namespace, name, r)
	for i := range r.Status.Conditions {
		if c := &r.Status.Conditions[i]; c.Type == porticov1alpha1.ConditionReady && c.ObservedGeneration == r.Generation {
			return c
		}
	}
	g.Expect(r.Status.Conditions).NotTo(BeEmpty(), "no Ready condition yet")
	g.Expect(false).To(BeTrue(), "Ready condition of an older generation")
	return nil
}

func expectReason(t *testing.T, namespace, name, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		c = readyIn(g, namespace, name)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	}, eventually).Should(Succeed())
	return c
}

// A host has one owner: the oldest APIRule claiming it. A later claim from
// another namespace is refused without naming the owner, and gets the
// host once the owner is gone.
func TestHostHasOneOwner(t *testing.T) {
	g := NewWithT(t)
	createServiceIn(t, ns, "host-a", nil)
	createServiceIn(t, otherNS, "host-b", nil)
	owner := apiRuleIn(t, ns, "host-owner", []porticov1alpha1.Hostname{"owned.example.com"}, "host-a")
	expectReason(t, ns, "host-owner", porticov1alpha1.ReasonApplied)
	afterCreation(t, owner)

	apiRuleIn(t, otherNS, "host-thief", []porticov1alpha1.Hostname{"owned.example.com"}, "host-b")
	c := expectReason(t, otherNS, "host-thief", porticov1alpha1.ReasonHostOccupied)
	g.Expect(c.Message).NotTo(ContainSubstring(ns), "the owner's namespace is not leaked")
	g.Expect(goneIn(otherNS, "host-thief", &networkingv1.VirtualService{})()).To(BeTrue())

	t.Run("hosts cannot be edited to jump the queue", func(t *testing.T) {
		live := &porticov1alpha1.APIRule{}
		getIn(NewWithT(t), ns, "host-owner", live)
		live.Spec.Hosts = []porticov1alpha1.Hostname{"other.example.com"}
		err := k8sClient.Update(context.Background(), live)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("hosts cannot be changed")))
	})

	t.Run("when the owner goes the next claimant gets the host", func(t *testing.T) {
		NewWithT(t).Expect(k8sClient.Delete(context.Background(), owner)).To(Succeed())
		expectReason(t, otherNS, "host-thief", porticov1alpha1.ReasonApplied)
	})
}

// A wildcard host needs the administrator's grant on the APIGateway; with
// it, an older exact claim under it still wins.
func TestWildcardHostsNeedAGrant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createServiceIn(t, ns, "wild-a", nil)
	createServiceIn(t, otherNS, "wild-b", nil)
	exact := apiRuleIn(t, ns, "exact", []porticov1alpha1.Hostname{"a.wild.example.com"}, "wild-a")
	expectReason(t, ns, "exact", porticov1alpha1.ReasonApplied)
	afterCreation(t, exact)
	apiRuleIn(t, otherNS, "wildcard", []porticov1alpha1.Hostname{"*.wild.example.com"}, "wild-b")
	expectReason(t, otherNS, "wildcard", porticov1alpha1.ReasonHostNotPermitted)

	gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName},
		Spec: operatorv1alpha1.APIGatewaySpec{APIRules: &operatorv1alpha1.APIRulesSpec{WildcardHosts: []operatorv1alpha1.WildcardHostGrant{
			{Host: "*.wild.example.com", Namespaces: []string{otherNS}},
		}}}}
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, gw) })
	c := expectReason(t, otherNS, "wildcard", porticov1alpha1.ReasonHostOccupied)
	g.Expect(c.Message).NotTo(ContainSubstring("a.wild.example.com"), "the owner's host is not leaked")
	g.Expect(c.Message).NotTo(ContainSubstring(ns))
	expectReason(t, ns, "exact", porticov1alpha1.ReasonApplied)
}

// Traffic routed to a Service must land on its own namespace's pods.
func TestServiceAliasesAreRefused(t *testing.T) {
	ctx := context.Background()
	create := func(t *testing.T, obj client.Object) {
		NewWithT(t).Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })
	}
	t.Run("ExternalName", func(t *testing.T) {
		create(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alias-ext", Namespace: ns},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "billing.analytics.svc.cluster.local"}})
		apiRuleIn(t, ns, "alias-ext", []porticov1alpha1.Hostname{"alias-ext.example.com"}, "alias-ext")
		expectReason(t, ns, "alias-ext", porticov1alpha1.ReasonBackendNotPermitted)
	})
	t.Run("no selector", func(t *testing.T) {
		create(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alias-nosel", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
		apiRuleIn(t, ns, "alias-nosel", []porticov1alpha1.Hostname{"alias-nosel.example.com"}, "alias-nosel")
		expectReason(t, ns, "alias-nosel", porticov1alpha1.ReasonBackendNotPermitted)
	})
	t.Run("endpoints in another namespace", func(t *testing.T) {
		createServiceIn(t, ns, "alias-eps", nil)
		apiRuleIn(t, ns, "alias-eps", []porticov1alpha1.Hostname{"alias-eps.example.com"}, "alias-eps")
		expectReason(t, ns, "alias-eps", porticov1alpha1.ReasonApplied)
		create(t, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "alias-eps-forged", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "alias-eps"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: otherNS, Name: "billing-0"}}},
		})
		expectReason(t, ns, "alias-eps", porticov1alpha1.ReasonBackendNotPermitted)
		NewWithT(t).Eventually(gone("alias-eps", &networkingv1.VirtualService{}), eventually).Should(BeTrue(), "the route is withdrawn")
	})
	t.Run("WorkloadEntry picked by the Service's selector", func(t *testing.T) {
		createServiceIn(t, ns, "alias-we", nil)
		we := &networkingv1.WorkloadEntry{ObjectMeta: metav1.ObjectMeta{Name: "alias-we", Namespace: ns, Labels: map[string]string{"app": "alias-we"}}}
		we.Spec.Address = "10.0.0.9"
		create(t, we)
		apiRuleIn(t, ns, "alias-we", []porticov1alpha1.Hostname{"alias-we.example.com"}, "alias-we")
		expectReason(t, ns, "alias-we", porticov1alpha1.ReasonBackendNotPermitted)
	})
	t.Run("ServiceEntry declaring the Service's host", func(t *testing.T) {
		createServiceIn(t, ns, "alias-se", nil)
		se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "alias-se", Namespace: otherNS}}
		se.Spec.Hosts = []string{"alias-se." + ns + ".svc.cluster.local"}
		se.Spec.Resolution = networkingv1alpha3.ServiceEntry_DNS
		se.Spec.Ports = []*networkingv1alpha3.ServicePort{{Number: 8080, Name: "http", Protocol: "HTTP"}}
		create(t, se)
		apiRuleIn(t, ns, "alias-se", []porticov1alpha1.Hostname{"alias-se.example.com"}, "alias-se")
		c := expectReason(t, ns, "alias-se", porticov1alpha1.ReasonBackendNotPermitted)
		NewWithT(t).Expect(c.Message).NotTo(ContainSubstring(otherNS))
	})
	t.Run("another namespace's wildcard ServiceEntry stops nobody", func(t *testing.T) {
		se := &networkingv1.ServiceEntry{ObjectMeta: metav1.ObjectMeta{Name: "everything", Namespace: otherNS}}
		se.Spec.Hosts = []string{"*.svc.cluster.local"}
		se.Spec.Resolution = networkingv1alpha3.ServiceEntry_DNS
		se.Spec.Ports = []*networkingv1alpha3.ServicePort{{Number: 8080, Name: "http", Protocol: "HTTP"}}
		create(t, se)
		createServiceIn(t, ns, "alias-wild", nil)
		apiRuleIn(t, ns, "alias-wild", []porticov1alpha1.Hostname{"alias-wild.example.com"}, "alias-wild")
		expectReason(t, ns, "alias-wild", porticov1alpha1.ReasonApplied)
	})
}

// Within a namespace, a second APIRule on the same pods cannot open what
// the first one guards, whichever of the two is written second.
func TestAccessConflictAcrossAPIRules(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createServiceIn(t, ns, "guarded", nil)
	admin := porticov1alpha1.Rule{Path: "/admin", JWT: orders.JWT}
	apiRuleIn(t, ns, "guard", []porticov1alpha1.Hostname{"guard.example.com"}, "guarded", admin)
	expectReason(t, ns, "guard", porticov1alpha1.ReasonApplied)

	evilKeys := *orders.JWT
	evilKeys.JWKSURI = "https://evil.example.com/jwks.json"
	for name, rule := range map[string]porticov1alpha1.Rule{
		"open-all":   {Path: "/*", NoAuth: ptr.To(true)},
		"open-admin": {Path: "/admin", NoAuth: ptr.To(true)},
		"other-iss":  {Path: "/admin", JWT: &porticov1alpha1.JWTAuthentication{Issuer: "https://evil.example.com", JWKSURI: "https://evil.example.com/jwks.json"}},
		"other-keys": {Path: "/other", JWT: &evilKeys},
	} {
		t.Run(name, func(t *testing.T) {
			apiRuleIn(t, ns, name, []porticov1alpha1.Hostname{porticov1alpha1.Hostname(name + ".guard.example.com")}, "guarded", rule)
			expectReason(t, ns, name, porticov1alpha1.ReasonAccessConflict)
			NewWithT(t).Expect(gone(name, &securityv1.AuthorizationPolicy{})()).To(BeTrue())
			NewWithT(t).Expect(gone(name, &securityv1.RequestAuthentication{})()).To(BeTrue())
			expectReason(t, ns, "guard", porticov1alpha1.ReasonApplied)
		})
	}

	t.Run("an edit of another APIRule cannot open the guarded path", func(t *testing.T) {
		apiRuleIn(t, ns, "public", []porticov1alpha1.Hostname{"public.guard.example.com"}, "guarded",
			porticov1alpha1.Rule{Path: "/public/*", NoAuth: ptr.To(true)})
		expectReason(t, ns, "public", porticov1alpha1.ReasonApplied)
		g.Eventually(func() error {
			live := &porticov1alpha1.APIRule{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "public"}, live); err != nil {
				return err
			}
			live.Spec.Rules[0].Path = "/*"
			return k8sClient.Update(ctx, live)
		}, eventually).Should(Succeed())
		expectReason(t, ns, "public", porticov1alpha1.ReasonAccessConflict)
		ap := &securityv1.AuthorizationPolicy{}
		get(g, "public", ap)
		g.Expect(ap.Spec.Rules[0].To[0].Operation.Paths).To(Equal([]string{"/public/*"}), "the live policy stays as it was")
	})
}
