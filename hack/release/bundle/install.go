package bundle

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// manifests is what the bundle takes from the rendered chart.
type manifests struct {
	deployment         deployment
	clusterPermissions []v1alpha1.StrategyDeploymentPermissions
	relatedImages      []v1alpha1.RelatedImage
	// extra are other objects a bundle carries as they are (Services, and
	// the Roles and RoleBindings of the release namespace).
	extra []*unstructured.Unstructured
}

// extraKinds are the kinds of rendered objects the bundle carries as plain
// manifests (both OLMs create them in the install namespace). Every one is
// a kind operator-registry v1.50.0's bundle.IsSupported admits, which
// operator-controller v1.2.0 requires of a bundle's objects: NetworkPolicy
// is not (the operator writes its own, --own-network-policy).
var extraKinds = map[string]bool{"Service": true, "ServiceMonitor": true, "ConfigMap": true}

// apiServerNamespace holds Service kubernetes, the API server's: the chart
// renders the operator's Role and RoleBinding there to read its
// EndpointSlice. Both OLMs create every namespaced object of a bundle in the
// install namespace (OLM v0's catalog operator sets the InstallPlan's
// namespace on each step, operator-controller the ClusterExtension's), so a
// Role in default cannot be expressed: its rules become clusterPermissions,
// read access to the EndpointSlices named kubernetes in every namespace.
// That is wider than the chart's and config/'s, and the one place it is.
const apiServerNamespace = "default"

// rendered sorts the objects the chart renders by what the bundle makes of
// them.
type rendered struct {
	deployments     []*unstructured.Unstructured
	serviceAccounts map[string]bool
	// roles are the rules of every ClusterRole and Role, by roleKey.
	roles map[string][]rbacv1.PolicyRule
	// bindings are the RoleBindings and ClusterRoleBindings (the same
	// fields), bindingKinds their kinds.
	bindings     []rbacv1.RoleBinding
	bindingKinds []string
	// namespaced are the Roles and RoleBindings of the release namespace,
	// as rendered.
	namespaced []*unstructured.Unstructured
	crds       map[string]bool
	extra      []*unstructured.Unstructured
}

// fromManifests turns the rendered chart into the CSV's install strategy
// (the Deployment, the cluster-wide RBAC by ServiceAccount, the related
// images) and the other objects of the bundle (the Services, the Roles and
// RoleBindings of the release namespace).
//
// The CSV has no namespaced permissions: OLM v0 with an AllNamespaces
// OperatorGroup, and operator-controller v1.2.0 always (it installs
// registry+v1 bundles in AllNamespaces mode only), turn a CSV's permissions
// into ClusterRoles and ClusterRoleBindings, which would let the operator
// read every Secret and write every Deployment of the cluster. The chart's
// Roles and RoleBindings go into the bundle as manifests instead, which
// both OLMs create in the install namespace whatever the install mode; their
// ServiceAccount subjects name no namespace, which Kubernetes reads as the
// RoleBinding's own.
func fromManifests(objects []*unstructured.Unstructured, namespace string, img images, controllers []string, crds []crd) (*manifests, error) {
	if namespace == apiServerNamespace {
		return nil, fmt.Errorf("render the chart for another namespace than %s: the operator's Role there becomes clusterPermissions", apiServerNamespace)
	}
	r, err := sortRendered(objects, namespace)
	if err != nil {
		return nil, err
	}
	// The CRDs are copied from config/; the chart must have the same ones.
	for _, c := range crds {
		if !r.crds[c.Name] {
			return nil, fmt.Errorf("the chart does not render the CRD %s of config/crd/bases: run make chart", c.Name)
		}
		delete(r.crds, c.Name)
	}
	for name := range r.crds {
		return nil, fmt.Errorf("the chart renders the CRD %s, which is not in config/crd/bases: run make chart", name)
	}
	clusterRules, namespacedRBAC, err := r.rbacByServiceAccount(namespace, controllers)
	if err != nil {
		return nil, err
	}
	if len(r.deployments) != 1 {
		return nil, fmt.Errorf("want one Deployment, the operator's, in the chart; got %d", len(r.deployments))
	}
	m := &manifests{extra: append(r.extra, namespacedRBAC...)}
	if m.deployment, err = operatorDeployment(r.deployments[0], img, controllers); err != nil {
		return nil, err
	}
	operatorSA, _, _ := unstructured.NestedString(r.deployments[0].Object, "spec", "template", "spec", "serviceAccountName")
	if !r.serviceAccounts[operatorSA] {
		return nil, fmt.Errorf("the operator Deployment runs as %q, not a ServiceAccount of the chart", operatorSA)
	}
	m.clusterPermissions = permissionsOf(clusterRules, operatorSA)
	if m.relatedImages, err = relatedImagesOf(m.deployment); err != nil {
		return nil, err
	}
	return m, nil
}

// sortRendered sorts the rendered objects by kind, refusing what a bundle
// cannot carry.
func sortRendered(objects []*unstructured.Unstructured, namespace string) (*rendered, error) {
	r := &rendered{serviceAccounts: map[string]bool{}, roles: map[string][]rbacv1.PolicyRule{}, crds: map[string]bool{}}
	for _, u := range objects {
		if hook := u.GetAnnotations()["helm.sh/hook"]; hook != "" {
			return nil, fmt.Errorf("the chart renders the hook %s %s, which a bundle cannot carry", u.GetKind(), u.GetName())
		}
		if ns := u.GetNamespace(); ns != "" && ns != namespace && !inAPIServerNamespace(u) {
			return nil, fmt.Errorf("the chart renders %s %s in namespace %s, not the release namespace %s", u.GetKind(), u.GetName(), ns, namespace)
		}
		switch u.GetKind() {
		case "Deployment":
			r.deployments = append(r.deployments, u)
		case "ServiceAccount":
			r.serviceAccounts[u.GetName()] = true
		case "ClusterRole", "Role":
			var role rbacv1.ClusterRole // the fields a Role has too
			if err := convert(u, &role); err != nil {
				return nil, err
			}
			if role.AggregationRule != nil {
				return nil, fmt.Errorf("the ClusterRole %s aggregates; a CSV has plain rules", role.Name)
			}
			r.roles[roleKey(u.GetKind(), u.GetNamespace(), u.GetName())] = role.Rules
			if u.GetKind() == "Role" && u.GetNamespace() == namespace {
				r.namespaced = append(r.namespaced, u)
			}
		case "ClusterRoleBinding", "RoleBinding":
			var binding rbacv1.RoleBinding
			if err := convert(u, &binding); err != nil {
				return nil, err
			}
			r.bindings = append(r.bindings, binding)
			r.bindingKinds = append(r.bindingKinds, u.GetKind())
			if u.GetKind() == "RoleBinding" && u.GetNamespace() == namespace {
				r.namespaced = append(r.namespaced, u)
			}
		case "CustomResourceDefinition":
			r.crds[u.GetName()] = true
		default:
			if !extraKinds[u.GetKind()] {
				return nil, fmt.Errorf("the chart renders %s %s, which hack/release/cmd/bundle does not know how to put into the bundle", u.GetKind(), u.GetName())
			}
			r.extra = append(r.extra, u)
		}
	}
	return r, nil
}

// rbacByServiceAccount sorts the chart's RBAC by what OLM makes of it: the
// rules the ClusterRoleBindings (and the RoleBindings of namespace default)
// grant each ServiceAccount, which become clusterPermissions (OLM creates
// the ClusterRoles and their bindings itself), and the Roles and
// RoleBindings of the release namespace, which become bundle manifests,
// their subjects without a namespace. Every ServiceAccount of the chart
// has an entry in cluster, empty when it has namespaced rules only: OLM
// creates the ServiceAccounts its CSV's permissions name, and only those.
func (r *rendered) rbacByServiceAccount(namespace string, controllers []string) (map[string][]rbacv1.PolicyRule, []*unstructured.Unstructured, error) {
	cluster := map[string][]rbacv1.PolicyRule{}
	boundRoles := map[string]bool{}
	bound := map[string]bool{}
	for i, binding := range r.bindings {
		kind := r.bindingKinds[i]
		ruleKey := roleKey(binding.RoleRef.Kind, binding.Namespace, binding.RoleRef.Name)
		rules, ok := r.roles[ruleKey]
		if !ok {
			return nil, nil, fmt.Errorf("the %s %s refers to %s, which the chart does not render", kind, binding.Name, ruleKey)
		}
		if kind == "ClusterRoleBinding" && binding.RoleRef.Kind != "ClusterRole" {
			return nil, nil, fmt.Errorf("the ClusterRoleBinding %s refers to a %s", binding.Name, binding.RoleRef.Kind)
		}
		if kind == "RoleBinding" && binding.RoleRef.Kind != "Role" {
			// OLM creates a bundle's ClusterRoles, but the bundle's RoleBindings
			// would not say which; the chart binds Roles only.
			return nil, nil, fmt.Errorf("the RoleBinding %s refers to a %s; the bundle carries Roles only", binding.Name, binding.RoleRef.Kind)
		}
		boundRoles[ruleKey] = true
		for _, s := range binding.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind || s.Namespace != namespace || !r.serviceAccounts[s.Name] {
				return nil, nil, fmt.Errorf("the %s %s binds %s %s/%s, not a ServiceAccount of the chart", kind, binding.Name, s.Kind, s.Namespace, s.Name)
			}
			bound[s.Name] = true
			if kind == "ClusterRoleBinding" || binding.Namespace == apiServerNamespace {
				cluster[s.Name] = append(cluster[s.Name], rules...)
			}
		}
	}
	for key := range r.roles {
		if !boundRoles[key] {
			return nil, nil, fmt.Errorf("the chart renders the %s, which no binding grants", key)
		}
	}
	for sa := range r.serviceAccounts {
		if !bound[sa] {
			return nil, nil, fmt.Errorf("the chart's ServiceAccount %s has no RBAC; OLM would not create it", sa)
		}
		if cluster[sa] == nil {
			// Namespaced rules only: an entry without rules still has OLM
			// create the ServiceAccount, with a ClusterRole that grants
			// nothing.
			cluster[sa] = []rbacv1.PolicyRule{}
		}
	}
	for _, name := range controllers {
		if !r.serviceAccounts[controllerBinary(name)] {
			return nil, nil, fmt.Errorf("the chart renders no ServiceAccount %s for the controller %s", controllerBinary(name), name)
		}
	}
	namespaced := make([]*unstructured.Unstructured, 0, len(r.namespaced))
	for _, u := range r.namespaced {
		u = u.DeepCopy()
		if u.GetKind() == "RoleBinding" {
			subjects, _, err := unstructured.NestedSlice(u.Object, "subjects")
			if err != nil {
				return nil, nil, err
			}
			for _, s := range subjects {
				if subject, ok := s.(map[string]any); ok {
					delete(subject, "namespace") // the RoleBinding's own, wherever OLM creates it
				}
			}
			if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
				return nil, nil, err
			}
		}
		namespaced = append(namespaced, u)
	}
	return cluster, namespaced, nil
}

// inAPIServerNamespace tells whether u is a Role or RoleBinding in namespace
// default, which becomes clusterPermissions.
func inAPIServerNamespace(u *unstructured.Unstructured) bool {
	return u.GetNamespace() == apiServerNamespace && (u.GetKind() == "Role" || u.GetKind() == "RoleBinding")
}

// roleKey names a ClusterRole or Role: "ClusterRole/<name>", "Role/<name>"
// in the release namespace, "Role/default/<name>" in namespace default.
func roleKey(kind, namespace, name string) string {
	if kind == "Role" && namespace == apiServerNamespace {
		return kind + "/" + apiServerNamespace + "/" + name
	}
	return kind + "/" + name
}

// permissionsOf lists rules by ServiceAccount: the operator's first, then by
// name.
func permissionsOf(rules map[string][]rbacv1.PolicyRule, operatorSA string) []v1alpha1.StrategyDeploymentPermissions {
	var out []v1alpha1.StrategyDeploymentPermissions
	for sa, r := range rules {
		out = append(out, v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: r})
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].ServiceAccountName == operatorSA) != (out[j].ServiceAccountName == operatorSA) {
			return out[i].ServiceAccountName == operatorSA
		}
		return out[i].ServiceAccountName < out[j].ServiceAccountName
	})
	return out
}

// convert decodes an unstructured object into a typed one, rejecting fields
// the type does not have.
func convert(u *unstructured.Unstructured, into any) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// operatorDeployment is the chart's operator Deployment as the CSV's
// install strategy: the spec as rendered, labels that name OLM instead of
// Helm as the manager, and RELATED_IMAGE_* for every controller on the
// operator container.
func operatorDeployment(u *unstructured.Unstructured, img images, controllers []string) (deployment, error) {
	var typed appsv1.Deployment
	if err := convert(u, &typed); err != nil {
		return deployment{}, err
	}
	spec, ok, err := unstructured.NestedMap(u.Object, "spec")
	if err != nil || !ok {
		return deployment{}, fmt.Errorf("the Deployment %s has no spec", u.GetName())
	}
	if labels, ok, _ := unstructured.NestedStringMap(spec, "template", "metadata", "labels"); ok {
		if err := unstructured.SetNestedStringMap(spec, olmLabels(labels), "template", "metadata", "labels"); err != nil {
			return deployment{}, err
		}
	}
	containers, _, err := unstructured.NestedSlice(spec, "template", "spec", "containers")
	if err != nil {
		return deployment{}, err
	}
	found := false
	for i, c := range containers {
		container, ok := c.(map[string]any)
		if !ok || container["image"] != img.operator() {
			continue
		}
		found = true
		env, _, err := unstructured.NestedSlice(container, "env")
		if err != nil {
			return deployment{}, err
		}
		for _, name := range controllers {
			env = setEnv(env, relatedImageEnv(name), img.controller(name))
		}
		container["env"] = env
		containers[i] = container
	}
	if !found {
		return deployment{}, fmt.Errorf("the Deployment %s has no container with the operator image %s", u.GetName(), img.operator())
	}
	if err := unstructured.SetNestedSlice(spec, containers, "template", "spec", "containers"); err != nil {
		return deployment{}, err
	}
	return deployment{Name: u.GetName(), Label: olmLabels(u.GetLabels()), Spec: spec}, nil
}

// setEnv sets a plain variable, replacing one of the same name.
func setEnv(env []any, name, value string) []any {
	for i, e := range env {
		if v, ok := e.(map[string]any); ok && v["name"] == name {
			env[i] = map[string]any{"name": name, "value": value}
			return env
		}
	}
	return append(env, map[string]any{"name": name, "value": value})
}

// olmLabels are the chart's labels for objects OLM manages: no chart
// version, managed by OLM rather than Helm. (Never portico-operator: the
// operator caches what carries that.)
func olmLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range labels {
		switch {
		case k == "helm.sh/chart":
		case k == "app.kubernetes.io/managed-by" && v == "Helm":
			out[k] = "olm"
		default:
			out[k] = v
		}
	}
	return out
}

// relatedImagesOf lists every image the operator runs or may start: its
// containers' images and the RELATED_IMAGE_* values, each named by its
// repository's last path element (portico-operator, <name>-controller),
// sorted by name.
func relatedImagesOf(d deployment) ([]v1alpha1.RelatedImage, error) {
	var podSpec struct {
		Template struct {
			Spec struct {
				Containers     []containerImages `json:"containers"`
				InitContainers []containerImages `json:"initContainers"`
			} `json:"spec"`
		} `json:"template"`
	}
	raw, err := json.Marshal(d.Spec)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &podSpec); err != nil {
		return nil, err
	}
	byName := map[string]string{}
	for _, c := range slices.Concat(podSpec.Template.Spec.InitContainers, podSpec.Template.Spec.Containers) {
		for _, ref := range c.refs() {
			name := imageName(ref)
			if other, ok := byName[name]; ok && other != ref {
				return nil, fmt.Errorf("two images named %s: %s and %s", name, other, ref)
			}
			byName[name] = ref
		}
	}
	out := make([]v1alpha1.RelatedImage, 0, len(byName))
	for name, ref := range byName {
		out = append(out, v1alpha1.RelatedImage{Name: name, Image: ref})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type containerImages struct {
	Image string `json:"image"`
	Env   []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
}

// refs are the container's image and its RELATED_IMAGE_* values.
func (c containerImages) refs() []string {
	refs := []string{c.Image}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, relatedImageEnvPrefix) && e.Value != "" {
			refs = append(refs, e.Value)
		}
	}
	return refs
}

// imageName is the last path element of an image's repository:
// ghcr.io/portico-dev/portico-operator:v1@sha256:… → portico-operator.
func imageName(ref string) string {
	repo, _, _ := strings.Cut(ref, "@")
	name := path.Base(repo)
	if i := strings.LastIndex(name, ":"); i >= 0 {
		name = name[:i]
	}
	return name
}
