package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// The tenants hold exactly the rights of the threat model: the built-in
// edit (alice) and admin (bob) in their namespace with Portico's and
// Istio's kinds, and the status subresources; nothing elsewhere.
func TestTenantsHoldTheRightsOfTheThreatModel(t *testing.T) {
	ctx := context.Background()
	dryRun := client.DryRunAll
	allowed := func(name string, err func() error) {
		t.Run(name, func(t *testing.T) { NewWithT(t).Expect(err()).To(Succeed()) })
	}
	forbidden := func(name string, err func() error) {
		t.Run(name, func(t *testing.T) {
			e := err()
			NewWithT(t).Expect(apierrors.IsForbidden(e)).To(BeTrue(), "want Forbidden, got %v", e)
		})
	}
	allowed("alice creates Services and APIRules in team-a", func() error {
		if err := alice.Create(ctx, service(teamA, "rights"), dryRun); err != nil {
			return err
		}
		return alice.Create(ctx, apiRule(teamA, "rights", "rights.a.example", publicGateway, backend("", "rights"), noAuth("/*")), dryRun)
	})
	allowed("bob writes AuthorizationPolicies in team-b", func() error {
		return bob.Create(ctx, &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "rights"}}, dryRun)
	})
	forbidden("alice creates nothing in team-b", func() error { return alice.Create(ctx, service(teamB, "rights"), dryRun) })
	forbidden("bob writes no AuthorizationPolicy in team-a", func() error {
		return bob.Create(ctx, &securityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "rights"}}, dryRun)
	})
	forbidden("bob cannot grant himself anything on the APIGateway", func() error {
		gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
		return bob.Patch(ctx, gw, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"owner":"bob"}}}`)), dryRun)
	})
	forbidden("bob cannot write EndpointSlices (the suite plays a stronger tenant as admin)", func() error {
		return bob.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "rights"}, AddressType: discoveryv1.AddressTypeIPv4}, dryRun)
	})
	forbidden("bob cannot write Istio's root namespace", func() error {
		return bob.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: "rights"}}, dryRun)
	})
}

// The controllers run as processes under their own ServiceAccounts, with
// only the RBAC of config/rbac, and become ready.
func TestControllersRunUnderTheirServiceAccounts(t *testing.T) {
	for _, name := range controllerNames {
		t.Run(name+"-controller is ready", func(t *testing.T) {
			NewWithT(t).Expect(controllers[name].awaitReady(context.Background(), eventually)).To(Succeed())
		})
	}
}
