package olmv1

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/manifest"
)

// resource is how the installer's rules name a kind, and whether its
// objects are namespaced.
type resource struct {
	group, plural string
	namespaced    bool
}

// kinds are the kinds operator-controller v1.2.0 creates of a registry+v1
// bundle: those the CSV's install strategy makes, and the bundle objects
// operator-registry v1.50.0's bundle.IsSupported admits that Portico's
// chart could render. A bundle with another kind fails Objects, as it would
// fail the install.
var kinds = map[string]resource{
	"CustomResourceDefinition": {group: "apiextensions.k8s.io", plural: "customresourcedefinitions"},
	"ClusterRole":              {group: rbacv1.GroupName, plural: "clusterroles"},
	"ClusterRoleBinding":       {group: rbacv1.GroupName, plural: "clusterrolebindings"},
	"Role":                     {group: rbacv1.GroupName, plural: "roles", namespaced: true},
	"RoleBinding":              {group: rbacv1.GroupName, plural: "rolebindings", namespaced: true},
	"ServiceAccount":           {plural: "serviceaccounts", namespaced: true},
	"Service":                  {plural: "services", namespaced: true},
	"ConfigMap":                {plural: "configmaps", namespaced: true},
	"Secret":                   {plural: "secrets", namespaced: true},
	"Deployment":               {group: appsv1.GroupName, plural: "deployments", namespaced: true},
	"PodDisruptionBudget":      {group: "policy", plural: "poddisruptionbudgets", namespaced: true},
	"ServiceMonitor":           {group: "monitoring.coreos.com", plural: "servicemonitors", namespaced: true},
	"PrometheusRule":           {group: "monitoring.coreos.com", plural: "prometheusrules", namespaced: true},
}

// resourceOf is the resource of an object's kind.
func resourceOf(u *unstructured.Unstructured) (resource, error) {
	r, ok := kinds[u.GetKind()]
	if !ok || u.GroupVersionKind().Group != r.group {
		return resource{}, fmt.Errorf("%s %s: not a kind OLM v1 installs from a bundle", u.GroupVersionKind(), u.GetName())
	}
	return r, nil
}

// GVR is the object's group, version and resource.
func GVR(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	r, err := resourceOf(u)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return u.GroupVersionKind().GroupVersion().WithResource(r.plural), nil
}

// Namespaced reports whether the object is namespaced.
func Namespaced(u *unstructured.Unstructured) bool {
	r, err := resourceOf(u)
	return err == nil && r.namespaced
}

// Bundle is a registry+v1 bundle as OLM v1 reads it: its CSV and its other
// manifests.
type Bundle struct {
	CSV    *v1alpha1.ClusterServiceVersion
	Others []*unstructured.Unstructured
}

// ReadBundle reads the files of a bundle (by path relative to the bundle
// directory, as package bundle writes them).
func ReadBundle(files map[string][]byte) (*Bundle, error) {
	b := &Bundle{}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasPrefix(name, "manifests/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		objects, err := manifest.Objects(files[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, u := range objects {
			if u.GetKind() != v1alpha1.ClusterServiceVersionKind {
				b.Others = append(b.Others, u)
				continue
			}
			if b.CSV != nil {
				return nil, fmt.Errorf("%s: a second ClusterServiceVersion", name)
			}
			b.CSV = &v1alpha1.ClusterServiceVersion{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b.CSV); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if b.CSV == nil {
		return nil, fmt.Errorf("the bundle has no ClusterServiceVersion")
	}
	return b, nil
}

// Objects are the objects operator-controller v1.2.0 creates of the bundle
// when a ClusterExtension installs it into namespace, in AllNamespaces
// mode, the only one it installs registry+v1 bundles in:
//
//   - a ServiceAccount for the Deployments' and for every ServiceAccount the
//     CSV's permissions and clusterPermissions name;
//   - a ClusterRole and a ClusterRoleBinding for every clusterPermissions
//     entry, and for every permissions entry too (AllNamespaces mode
//     promotes them; Portico's CSV has none). operator-controller names them
//     <CSV name>-<ServiceAccount>, cut short, then a hash of the entry:
//     these are named <CSV name>-<ServiceAccount>-<index> instead, since
//     nothing the installer is granted depends on their names;
//   - every other object of the bundle, the namespaced ones in namespace;
//   - the CSV's Deployments.
//
// Their labels and the owner references operator-controller adds are left
// out.
func (b *Bundle) Objects(namespace string) ([]*unstructured.Unstructured, error) {
	csv := b.CSV
	strategy := csv.Spec.InstallStrategy.StrategySpec
	if len(csv.Spec.APIServiceDefinitions.Owned) > 0 || len(csv.Spec.WebhookDefinitions) > 0 {
		return nil, fmt.Errorf("OLM v1 installs no API services or webhooks")
	}
	var out []*unstructured.Unstructured
	add := func(o any, gvk schema.GroupVersionKind) error {
		object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: object}
		u.SetGroupVersionKind(gvk)
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, u)
		return nil
	}

	var serviceAccounts []string
	for _, d := range strategy.DeploymentSpecs {
		serviceAccounts = append(serviceAccounts, orDefault(d.Spec.Template.Spec.ServiceAccountName))
	}
	all := slices.Concat(strategy.Permissions, strategy.ClusterPermissions)
	for _, p := range all {
		serviceAccounts = append(serviceAccounts, orDefault(p.ServiceAccountName))
	}
	slices.Sort(serviceAccounts)
	for _, sa := range slices.Compact(serviceAccounts) {
		if sa == "default" {
			continue
		}
		if err := add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: namespace}}, corev1.SchemeGroupVersion.WithKind("ServiceAccount")); err != nil {
			return nil, err
		}
	}
	for i, p := range all {
		sa := orDefault(p.ServiceAccountName)
		name := fmt.Sprintf("%s-%s-%d", csv.Name, sa, i)
		if err := add(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules}, rbacv1.SchemeGroupVersion.WithKind("ClusterRole")); err != nil {
			return nil, err
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}},
		}
		if err := add(binding, rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding")); err != nil {
			return nil, err
		}
	}
	for _, o := range b.Others {
		r, err := resourceOf(o)
		if err != nil {
			return nil, err
		}
		o = o.DeepCopy()
		if r.namespaced {
			o.SetNamespace(namespace)
		}
		out = append(out, o)
	}
	for _, d := range strategy.DeploymentSpecs {
		deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: namespace, Labels: d.Label}, Spec: d.Spec}
		if err := add(deployment, appsv1.SchemeGroupVersion.WithKind("Deployment")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Rules are every rule the objects grant: of their ClusterRoles, to hold
// cluster-wide, and of their Roles, to hold in namespace.
func Rules(objects []*unstructured.Unstructured) (cluster, namespaced []rbacv1.PolicyRule, err error) {
	for _, u := range objects {
		if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return nil, nil, err
		}
		if err := yaml.UnmarshalStrict(raw, &role); err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if role.AggregationRule != nil {
			return nil, nil, fmt.Errorf("%s %s aggregates: the rules it grants are not in the bundle", u.GetKind(), u.GetName())
		}
		if u.GetKind() == "ClusterRole" {
			cluster = append(cluster, role.Rules...)
		} else {
			namespaced = append(namespaced, role.Rules...)
		}
	}
	return cluster, namespaced, nil
}

func orDefault(serviceAccount string) string {
	if serviceAccount == "" {
		return "default"
	}
	return serviceAccount
}
