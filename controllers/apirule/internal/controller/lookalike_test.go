package controller

import (
	"testing"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// Labels are a claim: an object is an APIRule's only when the APIRule
// controls it in its own namespace, and only such objects start its
// reconciles.
func TestOwnsAndRequestsTrustNoLabelsAlone(t *testing.T) {
	rule := &porticov1alpha1.APIRule{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop", UID: "uid-shop"}}
	rule.SetGroupVersionKind(porticov1alpha1.GroupVersion.WithKind("APIRule"))
	labels := map[string]string{plan.LabelManagedBy: plan.ManagedBy, plan.LabelAPIRule: "shop", plan.LabelAPIRuleNamespace: "team-a"}
	controlledBy := func(uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: porticov1alpha1.GroupVersion.String(), Kind: "APIRule", Name: "shop", UID: types.UID("uid-" + uid), Controller: ptr.To(true)}}
	}
	for _, tc := range []struct {
		name        string
		obj         client.Object
		owned       bool
		reconciles  bool
		lookAlikeOf bool
	}{
		{"written for it in its namespace", &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop", Labels: labels, OwnerReferences: controlledBy("shop")}}, true, true, false},
		{"a former APIRule's of the same name", &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop", Labels: labels, OwnerReferences: controlledBy("old")}}, false, true, true},
		{"labelled in its namespace, controlled by none", &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x", Labels: labels}}, false, true, true},
		{"another tenant's look-alike", &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "shop", Labels: labels}}, false, false, true},
		{"another tenant's look-alike, even with an owner reference to it", &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "shop", Labels: labels, OwnerReferences: controlledBy("shop")}}, false, false, true},
		{"unlabelled and uncontrolled", &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "y"}}, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := owns(rule, tc.obj); got != tc.owned {
				t.Errorf("owns = %v, want %v", got, tc.owned)
			}
			if got := len(toAPIRuleRequests(tc.obj)) > 0; got != tc.reconciles {
				t.Errorf("starts a reconcile of team-a/shop = %v, want %v", got, tc.reconciles)
			}
			if got := labelledFor(rule, tc.obj) && !owns(rule, tc.obj); got != tc.lookAlikeOf {
				t.Errorf("reported as a look-alike = %v, want %v", got, tc.lookAlikeOf)
			}
		})
	}
}
