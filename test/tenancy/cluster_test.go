package tenancy

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/test/testenv"
)

// Gateways of the cluster administrator, shared by the tenants.
const (
	publicGateway   = rootNamespace + "/public"
	internalGateway = rootNamespace + "/internal"
)

// setUpCluster creates what the cluster administrator owns: namespaces,
// Portico's RBAC, the tenants' rights, the shared gateways and their pods,
// and the APIGateway that wants the controllers.
func setUpCluster(ctx context.Context) error {
	for _, ns := range []string{teamA, teamB, rootNamespace, systemNS} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	steps := []func(context.Context) error{installControllerRBAC, grantTenants, createSharedGateways}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return admin.Create(ctx, &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}})
}

// installControllerRBAC creates the ServiceAccounts, generated roles and
// bindings of config/rbac, as the chart installs them in portico-system.
func installControllerRBAC(ctx context.Context) error {
	dir := filepath.Join(testenv.RepoRoot(), "config", "rbac")
	roles, err := filepath.Glob(filepath.Join(dir, "*-controller", "role.yaml"))
	if err != nil || len(roles) == 0 {
		return fmt.Errorf("no controller roles in %s: %v", dir, err)
	}
	// The rate-limit service's, named after its binary.
	roles = append(roles, filepath.Join(dir, globallimit.ServiceName, "role.yaml"))
	files := append([]string{filepath.Join(dir, "service_accounts.yaml")}, roles...)
	files = append(files, filepath.Join(dir, "bindings.yaml"))
	for _, file := range files {
		objs, err := testenv.ReadManifests(file)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if namespaced, err := admin.IsObjectNamespaced(obj); err != nil {
				return err
			} else if namespaced && obj.GetNamespace() == "" {
				obj.SetNamespace(systemNS)
			}
			if err := admin.Create(ctx, obj); err != nil {
				return fmt.Errorf("%s: create %s %s: %w", file, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// grantTenants gives alice's group edit in team-a and bob's group admin in
// team-b. Istio's and Portico's kinds join edit and admin the way a
// platform adds them (aggregation labels), and envtest, which runs no
// aggregation controller, has its aggregated roles filled here. Both
// groups may also write status subresources (the stronger case).
func grantTenants(ctx context.Context) error {
	for _, role := range tenantRoles() {
		if err := admin.Create(ctx, role); err != nil {
			return err
		}
	}
	for _, name := range []string{"view", "edit", "admin"} {
		if err := aggregate(ctx, name); err != nil {
			return err
		}
	}
	for _, b := range []struct{ ns, group, role string }{
		{teamA, "team-a-devs", "edit"}, {teamA, "team-a-devs", "portico-tenant-status"},
		{teamB, "team-b-devs", "admin"}, {teamB, "team-b-devs", "portico-tenant-status"},
	} {
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: b.group + "-" + b.role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: b.group}},
		}
		if err := admin.Create(ctx, binding); err != nil {
			return err
		}
	}
	return nil
}

func tenantRoles() []*rbacv1.ClusterRole {
	crud := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	status := []string{"get", "update", "patch"}
	return []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-tenant", Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-edit": "true", "rbac.authorization.k8s.io/aggregate-to-admin": "true",
		}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"gateway.portico.dev"}, Resources: []string{"apirules", "ratelimits"}, Verbs: crud},
			{APIGroups: []string{"networking.istio.io"}, Verbs: crud, Resources: []string{
				"virtualservices", "gateways", "serviceentries", "destinationrules", "sidecars", "workloadentries", "workloadgroups", "envoyfilters", "proxyconfigs"}},
			{APIGroups: []string{"security.istio.io"}, Verbs: crud, Resources: []string{"authorizationpolicies", "requestauthentications", "peerauthentications"}},
			{APIGroups: []string{"gateway.networking.k8s.io"}, Verbs: crud, Resources: []string{"gateways", "httproutes", "grpcroutes", "referencegrants"}},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "portico-tenant-status"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"gateway.portico.dev"}, Resources: []string{"apirules/status", "ratelimits/status"}, Verbs: status},
			{APIGroups: []string{"networking.istio.io"}, Verbs: status, Resources: []string{
				"virtualservices/status", "gateways/status", "serviceentries/status", "destinationrules/status"}},
			{APIGroups: []string{"security.istio.io"}, Verbs: status, Resources: []string{"authorizationpolicies/status", "requestauthentications/status"}},
		},
	}}
}

// aggregate does what the clusterrole-aggregation controller does: it sets
// an aggregated ClusterRole's rules to those of the roles its selectors pick.
func aggregate(ctx context.Context, name string) error {
	role := &rbacv1.ClusterRole{}
	if err := admin.Get(ctx, client.ObjectKey{Name: name}, role); err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return fmt.Errorf("ClusterRole %s is not aggregated", name)
	}
	var rules []rbacv1.PolicyRule
	for _, s := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&s)
		if err != nil {
			return err
		}
		var picked rbacv1.ClusterRoleList
		if err := admin.List(ctx, &picked, client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return err
		}
		for _, p := range picked.Items {
			for _, r := range p.Rules {
				if p.Name != name && !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
					rules = append(rules, r)
				}
			}
		}
	}
	role.Rules = rules
	return admin.Update(ctx, role)
}

// createSharedGateways creates the administrator's gateways in Istio's
// root namespace, and the ingress pods of the public one.
func createSharedGateways(ctx context.Context) error {
	for name, selector := range map[string]map[string]string{
		"public":   {"istio": "ingressgateway"},
		"internal": {"istio": "internal-gateway"},
	} {
		if err := admin.Create(ctx, istioGateway(rootNamespace, name, selector)); err != nil {
			return err
		}
	}
	return admin.Create(ctx, ingressPod(rootNamespace, "ingressgateway-0", map[string]string{"istio": "ingressgateway"}))
}

func istioGateway(ns, name string, selector map[string]string) *networkingv1.Gateway {
	return &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingapi.Gateway{Selector: selector, Servers: []*networkingapi.Server{{
			Port: &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: []string{"*"},
		}}},
	}
}

// ingressPod is a gateway pod as its Deployment would create it; without a
// kubelet only its namespace and labels matter.
func ingressPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "istio-proxy", Image: "istio/proxyv2"}}},
	}
}
