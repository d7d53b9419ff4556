package olmv1

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const (
	// InstallerName names the installer's ServiceAccount, ClusterRole,
	// ClusterRoleBinding, Role and RoleBinding.
	InstallerName = "portico-installer"
	// ExtensionName is the ClusterExtension that installs Portico
	// (config/olmv1/clusterextension.yaml), whose finalizers the installer
	// may update.
	ExtensionName = "portico"
	// keepAnnotation keeps an object when its Helm release goes: Helm never
	// deletes it, and operator-controller puts no owner reference on it.
	keepAnnotation = "helm.sh/resource-policy"
)

// The verbs of each request operator-controller sends as the installer.
var (
	// Helm reads each object before it creates it (install, or to repair
	// it), patches it on upgrades and deletes it on uninstall.
	perObject = []string{"get", "patch", "delete"}
	// operator-controller watches every kind of its release in all
	// namespaces, through the installer's token (its content manager).
	watchAll = []string{"list", "watch"}
)

// FinalizersRule lets the installer set blockOwnerDeletion on the owner
// references to the ClusterExtension that operator-controller puts on every
// object: clusters with the OwnerReferencesPermissionEnforcement admission
// plugin (OpenShift) require it; others never check it.
func FinalizersRule(extension string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups: []string{"olm.operatorframework.io"}, Resources: []string{"clusterextensions/finalizers"},
		ResourceNames: []string{extension}, Verbs: []string{"update"},
	}
}

// InstallerRules are the rules the installer needs to have
// operator-controller install, upgrade, watch and uninstall the objects
// (Bundle.Objects) in namespace, as the ClusterExtension extension:
//
//   - CRDs: create, list and watch (no request of these names one object);
//     get and patch by name; no delete: they carry the keep annotation, so
//     that neither Helm nor the installer removes them, and with them every
//     user's object;
//   - ClusterRoles and ClusterRoleBindings: every verb of those requests on
//     any name, since operator-controller names them after a hash of their
//     rules and the CSV's name, which change with each release (an upgrade
//     deletes the previous release's); escalation prevention still lets the
//     installer grant no rule it does not hold;
//   - namespaced objects: list and watch in every namespace
//     (operator-controller's watch); in namespace, create, and get, patch
//     and delete by name;
//   - FinalizersRule;
//   - every rule the objects' ClusterRoles grant (cluster-wide) and their
//     Roles grant (in namespace), which RBAC requires it to hold to create
//     them and bind them.
//
// Rules that others cover are left out, so that without any one of them
// some request fails (the package's tests prove it on an API server).
func InstallerRules(objects []*unstructured.Unstructured, extension string) (cluster, namespaced []rbacv1.PolicyRule, err error) {
	type key struct{ group, plural string }
	names := map[key][]string{}
	var order []key
	for _, u := range objects {
		r, err := resourceOf(u)
		if err != nil {
			return nil, nil, err
		}
		k := key{r.group, r.plural}
		if _, ok := names[k]; !ok {
			order = append(order, k)
		}
		names[k] = append(names[k], u.GetName())
		if u.GetKind() == "CustomResourceDefinition" && u.GetAnnotations()[keepAnnotation] != "keep" {
			return nil, nil, fmt.Errorf("CRD %s lacks %s: keep, so deleting the ClusterExtension would delete it and every object of its kind", u.GetName(), keepAnnotation)
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].group != order[j].group {
			return order[i].group < order[j].group
		}
		return order[i].plural < order[j].plural
	})
	rule := func(k key, verbs []string, names []string) rbacv1.PolicyRule {
		r := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.plural}, Verbs: slices.Sorted(slices.Values(verbs))}
		if len(names) > 0 {
			r.ResourceNames = slices.Compact(slices.Sorted(slices.Values(names)))
		}
		return r
	}
	for _, k := range order {
		switch kind := kindOf(k.group, k.plural); {
		case kind == "CustomResourceDefinition":
			cluster = append(cluster, rule(k, []string{"create", "list", "watch"}, nil), rule(k, []string{"get", "patch"}, names[k]))
		case kind == "ClusterRole" || kind == "ClusterRoleBinding":
			cluster = append(cluster, rule(k, slices.Concat([]string{"create"}, perObject, watchAll), nil))
		case kinds[kind].namespaced:
			cluster = append(cluster, rule(k, watchAll, nil))
			namespaced = append(namespaced, rule(k, []string{"create"}, nil), rule(k, perObject, names[k]))
		default:
			cluster = append(cluster, rule(k, []string{"create", "list", "watch"}, nil), rule(k, perObject, names[k]))
		}
	}
	cluster = append(cluster, FinalizersRule(extension))
	clusterGrants, namespacedGrants, err := Rules(objects)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range slices.Concat(clusterGrants, namespacedGrants) {
		if len(r.NonResourceURLs) > 0 {
			return nil, nil, fmt.Errorf("a rule grants non-resource URLs %v, which Portico's RBAC never does", r.NonResourceURLs)
		}
	}
	cluster = withoutCovered(slices.Concat(cluster, clusterGrants), nil)
	namespaced = withoutCovered(slices.Concat(namespaced, namespacedGrants), cluster)
	return cluster, namespaced, nil
}

// kindOf is the kind of a resource of kinds.
func kindOf(group, plural string) string {
	for kind, r := range kinds {
		if r.group == group && r.plural == plural {
			return kind
		}
	}
	return ""
}

// withoutCovered drops, in order, every rule that the rules kept so far,
// the rules after it and also grant between them.
func withoutCovered(rules, also []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	kept := slices.Clone(rules)
	for i := 0; i < len(kept); {
		others := slices.Concat(kept[:i], kept[i+1:], also)
		if covered(others, kept[i]) {
			kept = slices.Delete(kept, i, i+1)
			continue
		}
		i++
	}
	return kept
}

// covered reports whether rules grant everything r does: every verb on
// every resource of every group, on each of r's resource names (or on
// every name, when r names none).
func covered(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	names := r.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	for _, group := range r.APIGroups {
		for _, res := range r.Resources {
			for _, verb := range r.Verbs {
				for _, name := range names {
					if !slices.ContainsFunc(rules, func(q rbacv1.PolicyRule) bool { return grants(q, group, res, verb, name) }) {
						return false
					}
				}
			}
		}
	}
	return true
}

// grants reports whether q grants verb on resource of group, on the object
// name (on every object when name is empty).
func grants(q rbacv1.PolicyRule, group, resource, verb, name string) bool {
	has := func(list []string, v string) bool {
		return slices.Contains(list, v) || slices.Contains(list, rbacv1.ResourceAll)
	}
	if !has(q.APIGroups, group) || !has(q.Resources, resource) || !has(q.Verbs, verb) {
		return false
	}
	return len(q.ResourceNames) == 0 || (name != "" && slices.Contains(q.ResourceNames, name))
}

// Installer is the installer of the objects in namespace: the
// ServiceAccount InstallerName there, a ClusterRole and a
// ClusterRoleBinding, a Role and a RoleBinding in namespace
// (InstallerRules).
func Installer(objects []*unstructured.Unstructured, namespace, extension string) ([]*unstructured.Unstructured, error) {
	cluster, namespaced, err := InstallerRules(objects, extension)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"app.kubernetes.io/name": InstallerName, "app.kubernetes.io/part-of": "portico"}
	meta := func(ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: InstallerName, Namespace: ns, Labels: labels}
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: InstallerName, Namespace: namespace}}
	typed := []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(namespace)},
		&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: meta(""), Rules: cluster},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: meta(""), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: InstallerName},
		},
		&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta(namespace), Rules: namespaced},
		&rbacv1.RoleBinding{
			TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta(namespace), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: InstallerName},
		},
	}
	out := make([]*unstructured.Unstructured, 0, len(typed))
	for _, o := range typed {
		object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		unstructured.RemoveNestedField(object, "metadata", "creationTimestamp")
		out = append(out, &unstructured.Unstructured{Object: object})
	}
	return out, nil
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

// installerHeader starts config/olmv1/installer.yaml.
const installerHeader = `# Code generated by hack/release/cmd/bundle from bundle/ (make bundle). DO NOT EDIT.
#
# The installer of Portico for OLM v1 (operator-controller v1.2.0): the
# ServiceAccount a ClusterExtension names in spec.serviceAccount, with the
# least RBAC operator-controller needs to install, upgrade, watch and
# uninstall Portico's bundle as it (package hack/release/olmv1). Create the
# namespace first, then apply this file and config/olmv1/clusterextension.yaml:
#
#   kubectl create namespace %[1]s
#   kubectl apply -f config/olmv1/installer.yaml
#
# It holds every rule Portico's operator and controllers are granted
# (Kubernetes lets it grant no rule it does not hold) and no escalate or
# bind; it may not delete Portico's CRDs.
`

// InstallerYAML is the installer of the bundle's files, installed into
// namespace by the ClusterExtension extension, as one YAML stream.
func InstallerYAML(files map[string][]byte, namespace, extension string) ([]byte, error) {
	b, err := ReadBundle(files)
	if err != nil {
		return nil, err
	}
	objects, err := b.Objects(namespace)
	if err != nil {
		return nil, err
	}
	installer, err := Installer(objects, namespace, extension)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, installerHeader, namespace)
	for _, u := range installer {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(raw)
	}
	return out.Bytes(), nil
}
