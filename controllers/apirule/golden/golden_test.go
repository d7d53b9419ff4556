package golden

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

type ruleOption func(*porticov1alpha1.APIRule)

func newAPIRule(opts ...ruleOption) *porticov1alpha1.APIRule {
	r := &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "uid-orders", Generation: 3},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts:   []porticov1alpha1.Hostname{"orders.example.com"},
			Gateway: "istio-system/public",
			Service: &porticov1alpha1.ServiceReference{Name: "orders", Port: 8080},
			Rules:   []porticov1alpha1.Rule{{Path: "/health", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}},
		},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func withJWT(r *porticov1alpha1.APIRule) {
	r.Spec.Rules = append(r.Spec.Rules, porticov1alpha1.Rule{Path: "/orders/*", Methods: []porticov1alpha1.HTTPMethod{"GET"},
		JWT: &porticov1alpha1.JWTAuthentication{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"}})
}

func onGatewayAPI(r *porticov1alpha1.APIRule) {
	r.Spec.Gateway = ""
	r.Spec.ParentRef = &porticov1alpha1.ParentReference{Namespace: "istio-system", Name: "edge"}
}

func kinds(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		switch o.(type) {
		case *securityv1.RequestAuthentication:
			out = append(out, "RequestAuthentication")
		case *securityv1.AuthorizationPolicy:
			out = append(out, "AuthorizationPolicy")
		case *networkingv1.VirtualService:
			out = append(out, "VirtualService")
		case *gwapiv1.HTTPRoute:
			out = append(out, "HTTPRoute")
		default:
			out = append(out, fmt.Sprintf("%T", o))
		}
	}
	return out
}

func TestFor(t *testing.T) {
	selectors := map[types.NamespacedName]map[string]string{{Namespace: "shop", Name: "orders"}: {"app": "orders"}}
	for name, tc := range map[string]struct {
		rule *porticov1alpha1.APIRule
		// kinds of the objects in the order written; reasons of the
		// statuses in the order patched.
		kinds, reasons []string
		// message is the final Ready message; hostShared whether the
		// status has the HostShared condition.
		message    string
		hostShared bool
	}{
		"Istio mode": {
			rule:  newAPIRule(),
			kinds: []string{"AuthorizationPolicy", "VirtualService"}, reasons: []string{porticov1alpha1.ReasonApplied},
			message: "AuthorizationPolicy shop/orders; VirtualService shop/orders applied",
		},
		"Istio mode with a JWT rule": {
			rule:    newAPIRule(withJWT),
			kinds:   []string{"RequestAuthentication", "AuthorizationPolicy", "VirtualService"},
			reasons: []string{porticov1alpha1.ReasonApplied},
			message: "RequestAuthentication shop/orders; AuthorizationPolicy shop/orders; VirtualService shop/orders applied",
		},
		"HTTPRoute mode: one status, once the Gateway answered": {
			rule:    newAPIRule(withJWT, onGatewayAPI),
			kinds:   []string{"RequestAuthentication", "AuthorizationPolicy", "HTTPRoute"},
			reasons: []string{porticov1alpha1.ReasonApplied},
			message: "RequestAuthentication shop/orders; AuthorizationPolicy shop/orders; HTTPRoute shop/orders applied", hostShared: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			w, err := For(tc.rule, nil, selectors)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kinds(w.Objects)).To(Equal(tc.kinds))
			for _, o := range w.Objects {
				g.Expect(metav1.IsControlledBy(o, tc.rule)).To(BeTrue(), "%T %s is controlled by the APIRule", o, o.GetName())
			}
			var reasons []string
			for _, s := range w.Statuses {
				c := meta.FindStatusCondition(s.Conditions, porticov1alpha1.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.ObservedGeneration).To(Equal(tc.rule.Generation))
				g.Expect(s.ObservedGeneration).To(Equal(tc.rule.Generation))
				g.Expect(meta.FindStatusCondition(s.Conditions, porticov1alpha1.ConditionHostShared) != nil).To(Equal(tc.hostShared))
				reasons = append(reasons, c.Reason)
			}
			g.Expect(reasons).To(Equal(tc.reasons))
			final := meta.FindStatusCondition(w.Final().Conditions, porticov1alpha1.ConditionReady)
			g.Expect(final.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(final.Message).To(Equal(tc.message))
			g.Expect(tc.rule.Status.Conditions).To(BeEmpty(), "the APIRule passed in is left as it was")
		})
	}
}

func TestForRefusesWhatTheControllerRefuses(t *testing.T) {
	for name, rule := range map[string]*porticov1alpha1.APIRule{
		"no gateway and no default gateway": newAPIRule(func(r *porticov1alpha1.APIRule) { r.Spec.Gateway = "" }),
		"a path Istio cannot match":         newAPIRule(func(r *porticov1alpha1.APIRule) { r.Spec.Rules[0].Path = "/a/*/b" }),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := For(rule, nil, nil)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}
