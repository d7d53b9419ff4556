package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/manifest"
)

// appVersion is the chart's appVersion, the default tag of every image.
func appVersion(t *testing.T) string {
	chrt, err := loadChart()
	if err != nil {
		t.Fatal(err)
	}
	return chrt.Metadata.AppVersion
}

func operatorDeployment(g Gomega, r *rendered) *appsv1.Deployment {
	return get[appsv1.Deployment](g, r, "Deployment", releaseNamespace, operatorName)
}

func managerContainer(g Gomega, d *appsv1.Deployment) corev1.Container {
	g.ExpectWithOffset(1, d.Spec.Template.Spec.Containers).To(HaveLen(1))
	c := d.Spec.Template.Spec.Containers[0]
	g.ExpectWithOffset(1, c.Name).To(Equal("manager"))
	return c
}

func TestDefaultRender(t *testing.T) {
	g := NewWithT(t)
	r := mustRender(t, "")

	t.Run("renders the operator, every controller's ServiceAccount and RBAC, and the CRDs", func(t *testing.T) {
		g := NewWithT(t)
		want := []ref{
			{"ServiceAccount", releaseNamespace, operatorName},
			{"ClusterRole", "", operatorName},
			{"ClusterRoleBinding", "", operatorName},
			{"Role", releaseNamespace, operatorName},
			{"RoleBinding", releaseNamespace, operatorName},
			{"Role", "default", operatorName + "-apiserver-endpoints"},
			{"RoleBinding", "default", operatorName + "-apiserver-endpoints"},
			{"Deployment", releaseNamespace, operatorName},
			{"NetworkPolicy", releaseNamespace, operatorName},
			{"Service", releaseNamespace, operatorName + "-metrics"},
			{"ConfigMap", releaseNamespace, "portico-dashboard"},
		}
		for _, rbac := range readGeneratedRBAC(t) {
			if rbac.binary == "operator" {
				continue
			}
			want = append(want, ref{"ServiceAccount", releaseNamespace, rbac.binary})
			if rbac.clusterRole != nil {
				want = append(want, ref{"ClusterRole", "", rbac.binary}, ref{"ClusterRoleBinding", "", rbac.binary})
			}
			if rbac.role != nil {
				want = append(want, ref{"Role", releaseNamespace, rbac.binary}, ref{"RoleBinding", releaseNamespace, rbac.binary})
			}
		}
		for _, crd := range readGeneratedCRDs(t) {
			want = append(want, ref{"CustomResourceDefinition", "", crd.GetName()})
		}
		g.Expect(want).To(ContainElements(
			ref{"ServiceAccount", releaseNamespace, "apirule-controller"},
			ref{"ClusterRole", "", "apirule-controller"},
			ref{"CustomResourceDefinition", "", "apirules.gateway.portico.dev"},
			ref{"CustomResourceDefinition", "", "apigateways.operator.portico.dev"},
			ref{"ServiceAccount", releaseNamespace, "gateway-controller"},
			ref{"ClusterRole", "", "gateway-controller"},
		), "config/ lacks what the chart must install")
		g.Expect(r.refs()).To(ConsistOf(want))
	})

	t.Run("every object carries the chart's labels", func(t *testing.T) {
		g := NewWithT(t)
		for _, u := range r.objects {
			g.Expect(u.GetLabels()).To(SatisfyAll(
				HaveKeyWithValue("app.kubernetes.io/part-of", "portico"),
				HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"),
				HaveKeyWithValue("app.kubernetes.io/instance", releaseName),
				HaveKeyWithValue("app.kubernetes.io/version", appVersion(t)),
				HaveKey("helm.sh/chart"),
			), "%s", refOf(u))
			switch name := u.GetName(); {
			case strings.HasPrefix(name, operatorName):
				g.Expect(u.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/name", operatorName), "%s", refOf(u))
			case strings.HasSuffix(name, "-controller"):
				g.Expect(u.GetLabels()).To(SatisfyAll(
					HaveKeyWithValue("app.kubernetes.io/name", name),
					HaveKeyWithValue("operator.portico.dev/controller", strings.TrimSuffix(name, "-controller")),
				), "%s", refOf(u))
			}
		}
	})

	t.Run("the operator Deployment runs the operator image with the contract's flags", func(t *testing.T) {
		g := NewWithT(t)
		d := operatorDeployment(g, r)
		g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{
			"app.kubernetes.io/name": operatorName, "app.kubernetes.io/instance": releaseName,
		}))
		g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("app.kubernetes.io/name", operatorName))
		pod := d.Spec.Template.Spec
		g.Expect(pod.ServiceAccountName).To(Equal(operatorName))
		g.Expect(pod.NodeSelector).To(BeEmpty())
		g.Expect(pod.Tolerations).To(BeEmpty())
		g.Expect(pod.Affinity).To(BeNil())
		g.Expect(pod.PriorityClassName).To(BeEmpty())
		g.Expect(pod.ImagePullSecrets).To(BeEmpty())

		c := managerContainer(g, d)
		g.Expect(c.Image).To(Equal("ghcr.io/portico-dev/portico-operator:" + appVersion(t)))
		g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
		g.Expect(c.Args).To(Equal([]string{
			"--metrics-bind-address=:8080",
			"--health-probe-bind-address=:8081",
			"--leader-elect=true",
			"--controller-image-registry=ghcr.io/portico-dev",
			"--controller-image-tag=" + appVersion(t),
			"--zap-log-level=info",
		}))
		g.Expect(c.Env).To(Equal([]corev1.EnvVar{{
			Name: "POD_NAMESPACE",
			ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			},
		}, {
			// In bytes: the operator sets Go's soft memory limit from it.
			Name: "PORTICO_MEMORY_LIMIT",
			ValueFrom: &corev1.EnvVarSource{
				ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "manager", Resource: "limits.memory", Divisor: resource.MustParse("1")},
			},
		}}))
		g.Expect(c.Ports).To(ConsistOf(
			corev1.ContainerPort{Name: "metrics", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "health", ContainerPort: 8081, Protocol: corev1.ProtocolTCP},
		))
		g.Expect(c.LivenessProbe.HTTPGet).To(Equal(&corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}))
		g.Expect(c.ReadinessProbe.HTTPGet).To(Equal(&corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}))
		g.Expect(c.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceCPU, resource.MustParse("10m")))
		g.Expect(c.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceMemory, resource.MustParse("256Mi")))
	})

	t.Run("the operator runs non-root, read-only, without privileges, with RuntimeDefault seccomp", func(t *testing.T) {
		g := NewWithT(t)
		d := operatorDeployment(g, r)
		g.Expect(d.Spec.Template.Spec.SecurityContext).To(Equal(&corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}))
		g.Expect(managerContainer(g, d).SecurityContext).To(Equal(&corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Privileged:               ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}))
	})

	t.Run("the metrics Service targets the operator's metrics port", func(t *testing.T) {
		g := NewWithT(t)
		svc := get[corev1.Service](g, r, "Service", releaseNamespace, operatorName+"-metrics")
		g.Expect(svc.Spec.Selector).To(Equal(operatorDeployment(g, r).Spec.Selector.MatchLabels))
		g.Expect(svc.Spec.Ports).To(ConsistOf(corev1.ServicePort{
			Name: "metrics", Port: 8080, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP,
		}))
	})

	t.Run("no APIGateway and none of prometheus-operator's objects unless asked for", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(r.ofKind("APIGateway")).To(BeEmpty())
		g.Expect(r.ofKind("ServiceMonitor")).To(BeEmpty())
		g.Expect(r.ofKind("PodMonitor")).To(BeEmpty())
		g.Expect(r.ofKind("PrometheusRule")).To(BeEmpty())
	})

	t.Run("the Grafana dashboard is a ConfigMap with the sidecar's label", func(t *testing.T) {
		g := NewWithT(t)
		cm := get[corev1.ConfigMap](g, r, "ConfigMap", releaseNamespace, "portico-dashboard")
		g.Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
		g.Expect(cm.Annotations).To(BeEmpty())
		g.Expect(cm.Data).To(HaveLen(1))
		raw, err := os.ReadFile(filepath.Join(chartDir, "files", "monitoring", "dashboard.json"))
		g.Expect(err).NotTo(HaveOccurred())
		want := strings.ReplaceAll(string(raw), `"portico-system"`, strconv.Quote(releaseNamespace))
		g.Expect(cm.Data["portico.json"]).To(MatchJSON(want))
		g.Expect(cm.Data["portico.json"]).NotTo(ContainSubstring("portico-system"))
		var dashboard struct {
			UID, Title string
			Templating struct {
				List []struct {
					Name    string
					Current struct{ Value string }
				}
			}
		}
		g.Expect(json.Unmarshal([]byte(cm.Data["portico.json"]), &dashboard)).To(Succeed())
		g.Expect(dashboard.UID).To(Equal("portico"))
		g.Expect(dashboard.Templating.List).To(ContainElement(SatisfyAll(
			HaveField("Name", "namespace"), HaveField("Current.Value", releaseNamespace),
		)), "the dashboard shows the series of the release namespace")
	})

	t.Run("NOTES explain how to create the APIGateway", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(r.notes).To(ContainSubstring("rollout status deployment/portico-operator"))
		g.Expect(r.notes).To(ContainSubstring("kind: APIGateway"))
		g.Expect(r.notes).To(ContainSubstring("namespace " + releaseNamespace))
	})

	g.Expect(r.ofKind("Role")).NotTo(BeEmpty())
	for _, role := range append(r.ofKind("Role"), r.ofKind("RoleBinding")...) {
		if role.GetName() == operatorName+"-apiserver-endpoints" {
			g.Expect(role.GetNamespace()).To(Equal("default"), "%s reads the API server's EndpointSlice in namespace default", refOf(role))
			continue
		}
		g.Expect(role.GetNamespace()).To(Equal(releaseNamespace), "%s is not in the release namespace", refOf(role))
	}
}

// TestRBACMatchesConfig guards the chart against drifting from the RBAC
// controller-gen generates from the kubebuilder markers: every binary's
// ClusterRole and Role must render with exactly the generated rules, in the
// release namespace, bound to the binary's ServiceAccount.
func TestRBACMatchesConfig(t *testing.T) {
	r := mustRender(t, "")
	generated := readGeneratedRBAC(t)
	var wantRoles []ref
	for _, rbac := range generated {
		serviceAccount := rbac.binary
		if rbac.binary == "operator" {
			serviceAccount = operatorName
		}
		subject := rbacv1.Subject{Kind: "ServiceAccount", Name: serviceAccount, Namespace: releaseNamespace}
		t.Run(rbac.binary, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(rbac.clusterRole != nil || rbac.role != nil).To(BeTrue())
			get[corev1.ServiceAccount](g, r, "ServiceAccount", releaseNamespace, serviceAccount)
			if c := rbac.clusterRole; c != nil {
				role := get[rbacv1.ClusterRole](g, r, "ClusterRole", "", c.Name)
				g.Expect(role.Rules).To(Equal(c.Rules), "ClusterRole %s differs from config/rbac/%s: run make manifests", c.Name, rbac.binary)
				binding := get[rbacv1.ClusterRoleBinding](g, r, "ClusterRoleBinding", "", c.Name)
				g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: c.Name}))
				g.Expect(binding.Subjects).To(ConsistOf(subject))
			}
			if c := rbac.role; c != nil {
				g.Expect(c.Namespace).To(Equal("portico-system"), "controller-gen's namespace, which the chart replaces")
				role := get[rbacv1.Role](g, r, "Role", releaseNamespace, c.Name)
				g.Expect(role.Rules).To(Equal(c.Rules), "Role %s differs from config/rbac/%s: run make manifests", c.Name, rbac.binary)
				binding := get[rbacv1.RoleBinding](g, r, "RoleBinding", releaseNamespace, c.Name)
				g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: c.Name}))
				g.Expect(binding.Subjects).To(ConsistOf(subject))
			}
			if c := rbac.roleInDefault; c != nil {
				g.Expect(rbac.binary).To(Equal("operator"), "only the operator reads namespace default")
				name := c.Name + "-apiserver-endpoints"
				role := get[rbacv1.Role](g, r, "Role", "default", name)
				g.Expect(role.Rules).To(Equal(c.Rules), "Role default/%s differs from config/rbac/%s: run make manifests", name, rbac.binary)
				binding := get[rbacv1.RoleBinding](g, r, "RoleBinding", "default", name)
				g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}))
				g.Expect(binding.Subjects).To(ConsistOf(subject))
			}
		})
		if rbac.roleInDefault != nil {
			wantRoles = append(wantRoles, ref{"Role", "default", rbac.roleInDefault.Name + "-apiserver-endpoints"})
		}
		if rbac.clusterRole != nil {
			wantRoles = append(wantRoles, ref{"ClusterRole", "", rbac.clusterRole.Name})
		}
		if rbac.role != nil {
			wantRoles = append(wantRoles, ref{"Role", releaseNamespace, rbac.role.Name})
		}
	}

	t.Run("no role the markers do not generate", func(t *testing.T) {
		g := NewWithT(t)
		var roles []ref
		for _, u := range append(r.ofKind("ClusterRole"), r.ofKind("Role")...) {
			roles = append(roles, refOf(u))
		}
		g.Expect(roles).To(ConsistOf(wantRoles))
	})
}

// TestCRDsMatchConfig checks the chart installs exactly the CRDs
// controller-gen generates, unchanged.
func TestCRDsMatchConfig(t *testing.T) {
	r := mustRender(t, "")
	generated := readGeneratedCRDs(t)
	g := NewWithT(t)
	g.Expect(r.ofKind("CustomResourceDefinition")).To(HaveLen(len(generated)))
	for _, want := range generated {
		t.Run(want.GetName(), func(t *testing.T) {
			g := NewWithT(t)
			got := get[apiextensionsv1.CustomResourceDefinition](g, r, "CustomResourceDefinition", "", want.GetName())
			g.Expect(got.Spec).To(Equal(decode[apiextensionsv1.CustomResourceDefinition](g, want).Spec),
				"CRD %s differs from config/crd/bases: run make manifests", want.GetName())
			for k, v := range want.GetAnnotations() {
				g.Expect(got.Annotations).To(HaveKeyWithValue(k, v))
			}
			g.Expect(got.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
		})
	}
}

// TestValues checks every value of the chart does what values.yaml says.
func TestValues(t *testing.T) {
	const apiGatewayKind = "operator.portico.dev/v1alpha1/APIGateway"
	digest := "sha256:" + strings.Repeat("ab", 32)

	cases := []struct {
		name   string
		values string
		opts   []renderOption
		check  func(g Gomega, r *rendered)
	}{
		{
			name:   "image repository, tag and pullPolicy",
			values: "image: {repository: mirror.example.com/portico/operator, tag: v9.9.9, pullPolicy: Always}",
			check: func(g Gomega, r *rendered) {
				c := managerContainer(g, operatorDeployment(g, r))
				g.Expect(c.Image).To(Equal("mirror.example.com/portico/operator:v9.9.9"))
				g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullAlways))
			},
		},
		{
			name:   "image digest wins over tag",
			values: "image: {tag: v9.9.9, digest: " + digest + "}",
			check: func(g Gomega, r *rendered) {
				g.Expect(managerContainer(g, operatorDeployment(g, r)).Image).To(Equal("ghcr.io/portico-dev/portico-operator@" + digest))
			},
		},
		{
			name:   "replicas",
			values: "replicas: 3",
			check: func(g Gomega, r *rendered) {
				d := operatorDeployment(g, r)
				g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
				g.Expect(managerContainer(g, d).Args).To(ContainElement("--leader-elect=true"))
			},
		},
		{
			name:   "one replica: no PodDisruptionBudget and no spread",
			values: "podDisruptionBudget: {minAvailable: 1}",
			check: func(g Gomega, r *rendered) {
				g.Expect(r.find("PodDisruptionBudget", releaseNamespace, operatorName)).To(BeNil(), "a budget over one pod would block every drain")
				g.Expect(operatorDeployment(g, r).Spec.Template.Spec.TopologySpreadConstraints).To(BeEmpty())
			},
		},
		{
			name:   "more replicas: maxUnavailable 1 over the operator's pods, spread across nodes",
			values: "replicas: 2",
			check: func(g Gomega, r *rendered) {
				d := operatorDeployment(g, r)
				pdb := get[policyv1.PodDisruptionBudget](g, r, "PodDisruptionBudget", releaseNamespace, operatorName)
				g.Expect(pdb.Spec.Selector).To(Equal(d.Spec.Selector), "the budget selects exactly the operator's pods")
				g.Expect(pdb.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(1))))
				g.Expect(pdb.Spec.MinAvailable).To(BeNil())
				g.Expect(pdb.Spec.UnhealthyPodEvictionPolicy).To(Equal(ptr.To(policyv1.AlwaysAllow)))
				g.Expect(d.Spec.Template.Spec.TopologySpreadConstraints).To(Equal([]corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: d.Spec.Selector,
				}}))
			},
		},
		{
			name:   "podDisruptionBudget minAvailable as a percentage",
			values: "replicas: 3\npodDisruptionBudget: {minAvailable: 50%}",
			check: func(g Gomega, r *rendered) {
				pdb := get[policyv1.PodDisruptionBudget](g, r, "PodDisruptionBudget", releaseNamespace, operatorName)
				g.Expect(pdb.Spec.MinAvailable).To(Equal(ptr.To(intstr.FromString("50%"))))
				g.Expect(pdb.Spec.MaxUnavailable).To(BeNil())
			},
		},
		{
			name:   "podDisruptionBudget maxUnavailable 2",
			values: "replicas: 3\npodDisruptionBudget: {maxUnavailable: 2}",
			check: func(g Gomega, r *rendered) {
				pdb := get[policyv1.PodDisruptionBudget](g, r, "PodDisruptionBudget", releaseNamespace, operatorName)
				g.Expect(pdb.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(2))))
			},
		},
		{
			name: "topologySpreadConstraints replace the default; one without a selector selects the operator's pods",
			values: `
replicas: 2
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {team: a}}}`,
			check: func(g Gomega, r *rendered) {
				d := operatorDeployment(g, r)
				g.Expect(d.Spec.Template.Spec.TopologySpreadConstraints).To(Equal([]corev1.TopologySpreadConstraint{
					{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: d.Spec.Selector},
					{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
				}))
			},
		},
		{
			name:   "leader election off for a single replica",
			values: "leaderElection: {enabled: false}",
			check: func(g Gomega, r *rendered) {
				g.Expect(managerContainer(g, operatorDeployment(g, r)).Args).To(ContainElement("--leader-elect=false"))
			},
		},
		{
			name:   "logLevel",
			values: "logLevel: debug",
			check: func(g Gomega, r *rendered) {
				g.Expect(managerContainer(g, operatorDeployment(g, r)).Args).To(ContainElement("--zap-log-level=debug"))
			},
		},
		{
			name:   "resources replace the defaults",
			values: "resources: {requests: {cpu: 50m, memory: 100Mi}, limits: {cpu: 1, memory: 1Gi}}",
			check: func(g Gomega, r *rendered) {
				g.Expect(managerContainer(g, operatorDeployment(g, r)).Resources).To(Equal(corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				}))
			},
		},
		{
			name:   "nodeSelector",
			values: "nodeSelector: {kubernetes.io/os: linux, node-role.kubernetes.io/infra: ''}",
			check: func(g Gomega, r *rendered) {
				g.Expect(operatorDeployment(g, r).Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{
					"kubernetes.io/os": "linux", "node-role.kubernetes.io/infra": "",
				}))
			},
		},
		{
			name:   "tolerations",
			values: "tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]",
			check: func(g Gomega, r *rendered) {
				g.Expect(operatorDeployment(g, r).Spec.Template.Spec.Tolerations).To(Equal([]corev1.Toleration{{
					Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule,
				}}))
			},
		},
		{
			name: "affinity",
			values: `
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}`,
			check: func(g Gomega, r *rendered) {
				g.Expect(operatorDeployment(g, r).Spec.Template.Spec.Affinity).To(Equal(&corev1.Affinity{
					NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
							NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
								Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"},
							}}}},
						},
					},
				}))
			},
		},
		{
			name:   "priorityClassName",
			values: "priorityClassName: system-cluster-critical",
			check: func(g Gomega, r *rendered) {
				g.Expect(operatorDeployment(g, r).Spec.Template.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
			},
		},
		{
			name:   "imagePullSecrets",
			values: "imagePullSecrets: [{name: regcred}]",
			check: func(g Gomega, r *rendered) {
				g.Expect(operatorDeployment(g, r).Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "regcred"}}))
			},
		},
		{
			name:   "podSecurityContext merges with the secure defaults",
			values: "podSecurityContext: {runAsUser: 65532, fsGroup: 65532}",
			check: func(g Gomega, r *rendered) {
				g.Expect(operatorDeployment(g, r).Spec.Template.Spec.SecurityContext).To(Equal(&corev1.PodSecurityContext{
					RunAsNonRoot:   ptr.To(true),
					RunAsUser:      ptr.To[int64](65532),
					FSGroup:        ptr.To[int64](65532),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				}))
			},
		},
		{
			name:   "securityContext of the container",
			values: "securityContext: {runAsUser: 1001}",
			check: func(g Gomega, r *rendered) {
				sc := managerContainer(g, operatorDeployment(g, r)).SecurityContext
				g.Expect(sc.RunAsUser).To(HaveValue(BeEquivalentTo(1001)))
				g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
			},
		},
		{
			name:   "podAnnotations and podLabels",
			values: "podAnnotations: {example.com/scrape: 'true'}\npodLabels: {team: edge}",
			check: func(g Gomega, r *rendered) {
				tmpl := operatorDeployment(g, r).Spec.Template
				g.Expect(tmpl.Annotations).To(HaveKeyWithValue("example.com/scrape", "true"))
				g.Expect(tmpl.Labels).To(HaveKeyWithValue("team", "edge"))
			},
		},
		{
			name:   "extraArgs and extraEnv",
			values: "extraArgs: [--zap-encoder=console]\nextraEnv: [{name: HTTPS_PROXY, value: 'http://proxy:3128'}, {name: GOMEMLIMIT, value: 200MiB}]",
			check: func(g Gomega, r *rendered) {
				c := managerContainer(g, operatorDeployment(g, r))
				g.Expect(c.Args).To(HaveLen(7))
				g.Expect(c.Args[6]).To(Equal("--zap-encoder=console"), "extra arguments come last")
				g.Expect(c.Env).To(ContainElements(
					corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"},
					corev1.EnvVar{Name: "GOMEMLIMIT", Value: "200MiB"}, // the operator keeps a GOMEMLIMIT of the user's
				))
			},
		},
		{
			name:   "serviceAccount annotations",
			values: "serviceAccount: {annotations: {example.com/role: operator}}",
			check: func(g Gomega, r *rendered) {
				sa := get[corev1.ServiceAccount](g, r, "ServiceAccount", releaseNamespace, operatorName)
				g.Expect(sa.Annotations).To(Equal(map[string]string{"example.com/role": "operator"}))
			},
		},
		{
			name: "controller image overrides become RELATED_IMAGE variables",
			values: `
controllers:
  apirule: {image: mirror.example.com/apirule-controller:v1}
  ratelimit: {image: "mirror.example.com/ratelimit-controller@` + digest + `"}
  gateway: {image: mirror.example.com/gateway-controller:v1}`,
			check: func(g Gomega, r *rendered) {
				g.Expect(managerContainer(g, operatorDeployment(g, r)).Env).To(HaveExactElements(
					HaveField("Name", "POD_NAMESPACE"),
					HaveField("Name", "PORTICO_MEMORY_LIMIT"),
					corev1.EnvVar{Name: "RELATED_IMAGE_APIRULE_CONTROLLER", Value: "mirror.example.com/apirule-controller:v1"},
					corev1.EnvVar{Name: "RELATED_IMAGE_GATEWAY_CONTROLLER", Value: "mirror.example.com/gateway-controller:v1"},
					corev1.EnvVar{Name: "RELATED_IMAGE_RATELIMIT_CONTROLLER", Value: "mirror.example.com/ratelimit-controller@" + digest},
				))
			},
		},
		{
			name:   "one controller image override leaves the others at the registry default",
			values: "controllers: {ratelimit: {image: mirror.example.com/rl:v2}}",
			check: func(g Gomega, r *rendered) {
				env := managerContainer(g, operatorDeployment(g, r)).Env
				g.Expect(env).To(ContainElement(corev1.EnvVar{Name: "RELATED_IMAGE_RATELIMIT_CONTROLLER", Value: "mirror.example.com/rl:v2"}))
				g.Expect(env).NotTo(ContainElement(HaveField("Name", "RELATED_IMAGE_APIRULE_CONTROLLER")))
			},
		},
		{
			name:   "controllerImages registry and tag",
			values: "controllerImages: {registry: 'registry.internal:5000/portico', tag: v1.2.3}",
			check: func(g Gomega, r *rendered) {
				g.Expect(managerContainer(g, operatorDeployment(g, r)).Args).To(ContainElements(
					"--controller-image-registry=registry.internal:5000/portico",
					"--controller-image-tag=v1.2.3",
				))
			},
		},
		{
			name:   "metrics off",
			values: "metrics: {enabled: false}",
			check: func(g Gomega, r *rendered) {
				c := managerContainer(g, operatorDeployment(g, r))
				g.Expect(c.Args).To(ContainElement("--metrics-bind-address=0"))
				g.Expect(c.Ports).NotTo(ContainElement(HaveField("Name", "metrics")))
				g.Expect(r.ofKind("Service")).To(BeEmpty())
			},
		},
		{
			name:   "serviceMonitor",
			values: "metrics: {serviceMonitor: {enabled: true, interval: 15s, scrapeTimeout: 10s, labels: {release: prometheus}}}",
			check: func(g Gomega, r *rendered) {
				sm := r.find("ServiceMonitor", releaseNamespace, operatorName)
				g.Expect(sm).NotTo(BeNil())
				g.Expect(sm.GetAPIVersion()).To(Equal("monitoring.coreos.com/v1"))
				g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
				svc := get[corev1.Service](g, r, "Service", releaseNamespace, operatorName+"-metrics")
				selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
				g.Expect(selector).NotTo(BeEmpty())
				g.Expect(svc.Labels).To(haveAll(selector), "the ServiceMonitor must select the metrics Service")
				jobLabel, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel")
				g.Expect(jobLabel).To(Equal("app.kubernetes.io/part-of"), "the alerts select Portico's targets by job=\"portico\"")
				g.Expect(svc.Labels).To(HaveKeyWithValue("app.kubernetes.io/part-of", "portico"))
				endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				g.Expect(endpoints).To(Equal([]any{map[string]any{
					"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "15s", "scrapeTimeout": "10s",
				}}))
				namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
				g.Expect(namespaces).To(Equal([]string{releaseNamespace}))
			},
		},
		{
			name:   "podMonitor",
			values: "metrics: {podMonitor: {enabled: true, interval: 15s, scrapeTimeout: 10s, labels: {release: prometheus}}}",
			check:  checkPodMonitor,
		},
		{
			name:   "podMonitor does not need the operator's metrics",
			values: "metrics: {enabled: false, podMonitor: {enabled: true}}",
			check: func(g Gomega, r *rendered) {
				g.Expect(r.find("PodMonitor", releaseNamespace, "portico-controllers")).NotTo(BeNil())
			},
		},
		{
			name:   "prometheusRule",
			values: "metrics: {prometheusRule: {enabled: true, labels: {release: prometheus}}}",
			check:  checkPrometheusRule,
		},
		{
			name:   "dashboard label, labelValue and annotations",
			values: "metrics: {dashboard: {label: example.com/dashboard, labelValue: portico, annotations: {grafana_folder: Gateways}}}",
			check: func(g Gomega, r *rendered) {
				cm := get[corev1.ConfigMap](g, r, "ConfigMap", releaseNamespace, "portico-dashboard")
				g.Expect(cm.Labels).To(HaveKeyWithValue("example.com/dashboard", "portico"))
				g.Expect(cm.Labels).NotTo(HaveKey("grafana_dashboard"))
				g.Expect(cm.Annotations).To(Equal(map[string]string{"grafana_folder": "Gateways"}))
			},
		},
		{
			name:   "dashboard off",
			values: "metrics: {dashboard: {enabled: false}}",
			check: func(g Gomega, r *rendered) {
				g.Expect(r.ofKind("ConfigMap")).To(BeEmpty())
			},
		},
		{
			name:   "apiGateway.create on a cluster serving the APIGateway API",
			values: "apiGateway: {create: true, spec: {controllers: [{name: apirule, replicas: 2, logLevel: debug}]}}",
			opts:   []renderOption{withAPIVersions(apiGatewayKind)},
			check: func(g Gomega, r *rendered) {
				gw := get[operatorv1alpha1.APIGateway](g, r, "APIGateway", "", "default")
				g.Expect(gw.Spec.Controllers).To(HaveExactElements(SatisfyAll(
					HaveField("Name", operatorv1alpha1.ControllerAPIRule),
					HaveField("Replicas", HaveValue(BeEquivalentTo(2))),
					HaveField("LogLevel", BeEquivalentTo("debug")),
				)))
				g.Expect(gw.Labels).To(HaveKeyWithValue("app.kubernetes.io/part-of", "portico"))
				g.Expect(gw.Annotations).To(BeEmpty())
				g.Expect(r.notes).To(ContainSubstring(`The chart created the APIGateway "default"`))
			},
		},
		{
			name:   "apiGateway.create with an empty spec",
			values: "apiGateway: {create: true}",
			opts:   []renderOption{withAPIVersions(apiGatewayKind)},
			check: func(g Gomega, r *rendered) {
				g.Expect(get[operatorv1alpha1.APIGateway](g, r, "APIGateway", "", "default").Spec).To(Equal(operatorv1alpha1.APIGatewaySpec{
					NetworkPolicies: &operatorv1alpha1.NetworkPoliciesSpec{Enabled: ptr.To(true)},
				}), "only networkPolicy's default")
			},
		},
		{
			name:   "apiGateway.create in the release that installs the CRD: left out, NOTES say to upgrade",
			values: "apiGateway: {create: true}",
			check: func(g Gomega, r *rendered) {
				g.Expect(r.ofKind("APIGateway")).To(BeEmpty())
				g.Expect(r.notes).To(ContainSubstring("helm upgrade portico <chart> -n " + releaseNamespace + " --reuse-values"))
			},
		},
		{
			name:   "apiGateway.create with CRDs installed outside the chart",
			values: "apiGateway: {create: true}\ncrds: {install: false}",
			check: func(g Gomega, r *rendered) {
				g.Expect(r.find("APIGateway", "", "default")).NotTo(BeNil())
				g.Expect(r.notes).To(ContainSubstring(`The chart created the APIGateway "default"`))
			},
		},
		{
			name:   "crds.install=false installs no CRD",
			values: "crds: {install: false}",
			check: func(g Gomega, r *rendered) {
				g.Expect(r.ofKind("CustomResourceDefinition")).To(BeEmpty())
				g.Expect(r.notes).To(ContainSubstring("crds.install is false"))
			},
		},
		{
			name:   "crds.keep=false lets helm uninstall delete the CRDs",
			values: "crds: {keep: false}",
			check: func(g Gomega, r *rendered) {
				crds := r.ofKind("CustomResourceDefinition")
				g.Expect(crds).NotTo(BeEmpty())
				for _, crd := range crds {
					g.Expect(crd.GetAnnotations()).NotTo(HaveKey("helm.sh/resource-policy"), crd.GetName())
					g.Expect(crd.GetAnnotations()).To(HaveKey("controller-gen.kubebuilder.io/version"), crd.GetName())
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := render(t, tc.values, tc.opts...)
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, r)
		})
	}
}

// haveAll matches a map holding every key and value of want.
func haveAll(want map[string]string) OmegaMatcher {
	var matchers []OmegaMatcher
	for k, v := range want {
		matchers = append(matchers, HaveKeyWithValue(k, v))
	}
	return SatisfyAll(matchers...)
}

// TestRejectsBadValues checks values.schema.json and the templates refuse
// bad values with a message that names the value and the problem.
func TestRejectsBadValues(t *testing.T) {
	cases := []struct {
		name    string
		values  string
		wantErr []string
	}{
		{"replicas as a word", "replicas: two", []string{"at '/replicas'", "got string, want integer"}},
		{"negative replicas", "replicas: -1", []string{"at '/replicas'", "minimum"}},
		{"unknown top-level key", "replica: 2", []string{"additional properties 'replica' not allowed"}},
		{"unknown key in image", "image: {tags: v1}", []string{"at '/image'", "additional properties 'tags' not allowed"}},
		{"bad pullPolicy", "image: {pullPolicy: Sometimes}", []string{"at '/image/pullPolicy'", "'Always', 'IfNotPresent', 'Never'"}},
		{"bad digest", "image: {digest: latest}", []string{"at '/image/digest'"}},
		{"bad logLevel", "logLevel: verbose", []string{"at '/logLevel'", "'debug', 'info', 'error'"}},
		{"bad quantity", "resources: {limits: {memory: 256 MB}}", []string{"at '/resources/limits/memory'", "'256 MB' does not match pattern"}},
		{"unknown resources key", "resources: {limit: {memory: 1Gi}}", []string{"at '/resources'", "'limit' not allowed"}},
		{"nodeSelector with a number", "nodeSelector: {zone: 1}", []string{"at '/nodeSelector/zone'", "want string"}},
		{"tolerations as a map", "tolerations: {key: x}", []string{"at '/tolerations'", "want array"}},
		{"bad toleration operator", "tolerations: [{key: x, operator: In}]", []string{"at '/tolerations/0/operator'", "'Exists', 'Equal'"}},
		{"imagePullSecrets as strings", "imagePullSecrets: [regcred]", []string{"at '/imagePullSecrets/0'", "want object"}},
		{"unknown controller", "controllers: {ingress: {image: x}}", []string{"at '/controllers'", "'ingress' not allowed"}},
		{"gateway secret name not a Secret name", "controllers: {gateway: {secretNames: [Wildcard_TLS]}}", []string{"at '/controllers/gateway/secretNames/0'", "does not match pattern"}},
		{"gateway secret name too long", "controllers: {gateway: {secretNames: [" + strings.Repeat("s", 254) + "]}}", []string{"at '/controllers/gateway/secretNames/0'", "maxLength"}},
		{"gateway secret listed twice", "controllers: {gateway: {secretNames: [wildcard-tls, wildcard-tls]}}", []string{"at '/controllers/gateway/secretNames'", "items at 0 and 1 are equal"}},
		{"gateway secretNames as a string", "controllers: {gateway: {secretNames: wildcard-tls}}", []string{"at '/controllers/gateway/secretNames'", "want array"}},
		{"gateway ConfigMap name not a ConfigMap name", "controllers: {gateway: {configMapNames: [Client_CA]}}", []string{"at '/controllers/gateway/configMapNames/0'", "does not match pattern"}},
		{"gateway ConfigMap listed twice", "controllers: {gateway: {configMapNames: [client-ca, client-ca]}}", []string{"at '/controllers/gateway/configMapNames'", "items at 0 and 1 are equal"}},
		{"unknown gateway controller setting", "controllers: {gateway: {namespaces: [edge]}}", []string{"at '/controllers/gateway'", "'namespaces' not allowed"}},
		{"controller setting the operator cannot pass", "controllers: {apirule: {replicas: 2}}", []string{"at '/controllers/apirule'", "'replicas' not allowed"}},
		{"registry with a space", "controllerImages: {registry: 'my registry'}", []string{"at '/controllerImages/registry'"}},
		{"crds.install as a string", "crds: {install: 'yes'}", []string{"at '/crds/install'", "got string, want boolean"}},
		{"podDisruptionBudget with both", "podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}", []string{"at '/podDisruptionBudget'", "maxProperties"}},
		{"podDisruptionBudget negative", "podDisruptionBudget: {maxUnavailable: -1}", []string{"at '/podDisruptionBudget/maxUnavailable'"}},
		{"podDisruptionBudget bad percentage", "podDisruptionBudget: {minAvailable: half}", []string{"at '/podDisruptionBudget/minAvailable'"}},
		{"podDisruptionBudget unknown key", "podDisruptionBudget: {maxUnavailble: 1}", []string{"at '/podDisruptionBudget'", "'maxUnavailble' not allowed"}},
		{"topology spread without a key", "topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: ScheduleAnyway}]", []string{"at '/topologySpreadConstraints/0'", "topologyKey"}},
		{"extraArgs without dashes", "extraArgs: [leader-elect]", []string{"at '/extraArgs/0'"}},
		{"bad serviceMonitor interval", "metrics: {serviceMonitor: {interval: 30}}", []string{"at '/metrics/serviceMonitor/interval'", "want string"}},
		{"bad podMonitor interval", "metrics: {podMonitor: {interval: 1 minute}}", []string{"at '/metrics/podMonitor/interval'", "does not match pattern"}},
		{"unknown prometheusRule key", "metrics: {prometheusRule: {rules: []}}", []string{"at '/metrics/prometheusRule'", "'rules' not allowed"}},
		{"dashboard label not a label key", "metrics: {dashboard: {label: 'grafana dashboard'}}", []string{"at '/metrics/dashboard/label'", "does not match pattern"}},
		{"dashboard labelValue as a number", "metrics: {dashboard: {labelValue: 1}}", []string{"at '/metrics/dashboard/labelValue'", "want string"}},
		{"apiGateway.spec as a list", "apiGateway: {spec: []}", []string{"at '/apiGateway/spec'", "want object"}},
		{"networkPolicy.enabled as a string", "networkPolicy: {enabled: 'no'}", []string{"at '/networkPolicy/enabled'", "want boolean"}},
		{"metricsNamespaces not a namespace name", "networkPolicy: {metricsNamespaces: [Monitoring]}", []string{"at '/networkPolicy/metricsNamespaces/0'", "does not match pattern"}},
		{"metricsNamespaces as a string", "networkPolicy: {metricsNamespaces: monitoring}", []string{"at '/networkPolicy/metricsNamespaces'", "want array"}},
		{"metricsNamespaces listed twice", "networkPolicy: {metricsNamespaces: [monitoring, monitoring]}", []string{"at '/networkPolicy/metricsNamespaces'", "items at 0 and 1 are equal"}},
		{"API server CIDR without a prefix length", "networkPolicy: {apiServer: {cidrs: [10.0.0.1]}}", []string{"at '/networkPolicy/apiServer/cidrs/0'", "does not match pattern"}},
		{"API server port out of range", "networkPolicy: {apiServer: {ports: [70000]}}", []string{"at '/networkPolicy/apiServer/ports/0'", "maximum"}},
		{"no API server port", "networkPolicy: {apiServer: {ports: []}}", []string{"at '/networkPolicy/apiServer/ports'", "minItems"}},
		{"unknown networkPolicy key", "networkPolicy: {metricsNamespace: [monitoring]}", []string{"at '/networkPolicy'", "'metricsNamespace' not allowed"}},
		{
			"replicas without leader election", "replicas: 2\nleaderElection: {enabled: false}",
			[]string{"replicas is 2 but leaderElection.enabled is false: more than one operator replica needs leader election"},
		},
		{
			"serviceMonitor without metrics", "metrics: {enabled: false, serviceMonitor: {enabled: true}}",
			[]string{"metrics.serviceMonitor.enabled needs metrics.enabled"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := render(t, tc.values)
			g.Expect(err).To(HaveOccurred())
			for _, want := range tc.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

// TestValuesCoverEveryController checks every controller with RBAC in
// config/ has its entry in values.yaml and values.schema.json, so its image
// can be overridden.
func TestValuesCoverEveryController(t *testing.T) {
	g := NewWithT(t)
	values, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var schema struct {
		Properties struct {
			Controllers struct {
				Properties map[string]any `json:"properties"`
			} `json:"controllers"`
		} `json:"properties"`
	}
	g.Expect(json.Unmarshal(raw, &schema)).To(Succeed())

	names := controllerNames(t)
	g.Expect(names).To(ContainElement("apirule"))
	for _, name := range names {
		g.Expect(values["controllers"]).To(HaveKey(name), "values.yaml lacks controllers.%s", name)
		g.Expect(schema.Properties.Controllers.Properties).To(HaveKey(name), "values.schema.json lacks controllers.%s", name)
	}
}

// TestLint runs helm lint (the SDK's, as `helm lint --strict` does) with the
// default values and with every optional part turned on.
func TestLint(t *testing.T) {
	cases := []struct {
		name   string
		values string
	}{
		{"default values", ""},
		{"everything on", `
replicas: 2
apiGateway: {create: true, spec: {controllers: [{name: ratelimit, enabled: false}]}}
metrics: {serviceMonitor: {enabled: true}, podMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {annotations: {grafana_folder: Portico}}}
controllers: {apirule: {image: mirror.example.com/apirule-controller:v1}, gateway: {secretNames: [wildcard-tls]}}
crds: {keep: false}
imagePullSecrets: [{name: regcred}]
tolerations: [{operator: Exists}]
podDisruptionBudget: {minAvailable: 1}
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]`},
		{"no CRDs, no metrics", "crds: {install: false}\nmetrics: {enabled: false}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			values, err := chartutil.ReadValues([]byte(tc.values))
			g.Expect(err).NotTo(HaveOccurred())
			linter := lint.All(chartDir, values, releaseNamespace, false)
			var problems []string
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					problems = append(problems, m.Error())
				}
			}
			g.Expect(problems).To(BeEmpty())
		})
	}
}

// TestGatewaySecretNames checks controllers.gateway.secretNames: the
// gateway controller's ClusterRole gets one more rule, reading exactly the
// Secrets listed (the default gateway's spec.gateway.certificate.secretName),
// after the generated rules; without names it is the generated ClusterRole.
func TestGatewaySecretNames(t *testing.T) {
	generated := map[string]*rbacv1.ClusterRole{}
	for _, rbac := range readGeneratedRBAC(t) {
		if rbac.clusterRole != nil {
			generated[rbac.binary] = rbac.clusterRole
		}
	}
	const name = "gateway-controller"
	if generated[name] == nil {
		t.Fatalf("config/rbac/%s has no ClusterRole: run make manifests", name)
	}
	// othersUnchanged checks every other ClusterRole is the generated one.
	othersUnchanged := func(g Gomega, r *rendered) {
		for binary, want := range generated {
			if binary == name {
				continue
			}
			g.Expect(get[rbacv1.ClusterRole](g, r, "ClusterRole", "", want.Name).Rules).To(Equal(want.Rules), "ClusterRole %s", want.Name)
		}
	}

	t.Run("the Secrets listed become readable by name", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, "controllers: {gateway: {secretNames: [wildcard-tls, edge.example.com-tls]}}")
		role := get[rbacv1.ClusterRole](g, r, "ClusterRole", "", name)
		g.Expect(role.Rules).To(Equal(append(slices.Clone(generated[name].Rules), rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"},
			ResourceNames: []string{"wildcard-tls", "edge.example.com-tls"},
		})))
		othersUnchanged(g, r)
	})

	for _, tc := range []struct{ name, values string }{
		{"by default no Secret beyond the generated rules", ""},
		{"an empty list grants nothing more", "controllers: {gateway: {secretNames: []}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := mustRender(t, tc.values)
			g.Expect(get[rbacv1.ClusterRole](g, r, "ClusterRole", "", name).Rules).To(Equal(generated[name].Rules))
			othersUnchanged(g, r)
		})
	}

	t.Run("the ConfigMaps listed become readable by name, after the Secrets", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, "controllers: {gateway: {secretNames: [wildcard-tls], configMapNames: [client-ca]}}")
		role := get[rbacv1.ClusterRole](g, r, "ClusterRole", "", name)
		g.Expect(role.Rules).To(Equal(append(slices.Clone(generated[name].Rules), rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"wildcard-tls"},
		}, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"client-ca"},
		})))
		othersUnchanged(g, r)
	})

	t.Run("no Secret is readable or writable by every name", func(t *testing.T) {
		g := NewWithT(t)
		r := mustRender(t, "controllers: {gateway: {secretNames: [wildcard-tls]}}")
		for _, rule := range get[rbacv1.ClusterRole](g, r, "ClusterRole", "", name).Rules {
			if !slices.Contains(rule.Resources, "secrets") {
				continue
			}
			for _, verb := range rule.Verbs {
				if verb != "create" { // create cannot be restricted by name
					g.Expect(rule.ResourceNames).NotTo(BeEmpty(), "%s on secrets names the Secrets: %+v", verb, rule)
				}
			}
		}
	})
}

// TestAdmissionPolicyMatchesConfig: the chart's finalizer policy is
// config/admission's (which config's envtest applies for real), with the
// binding's parameter in the release namespace, and only on clusters that
// serve the policy's API.
func TestAdmissionPolicyMatchesConfig(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(configDir, "admission", "apirule-finalizer.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := manifest.Objects(raw)
	g.Expect(err).NotTo(HaveOccurred())
	// helm install reads the cluster's kinds from discovery.
	r := mustRender(t, "", withAPIVersions("admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"))
	for _, want := range objs {
		got := r.find(want.GetKind(), "", releaseName+"-apirule-finalizer")
		g.Expect(got).NotTo(BeNil(), "%s of config/admission", want.GetKind())
		wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
		if want.GetKind() == "MutatingAdmissionPolicyBinding" {
			g.Expect(unstructured.SetNestedField(wantSpec, releaseNamespace, "paramRef", "namespace")).To(Succeed())
			g.Expect(unstructured.SetNestedField(wantSpec, releaseName+"-apirule-finalizer", "policyName")).To(Succeed())
		}
		g.Expect(got.Object["spec"]).To(Equal(wantSpec), "%s differs from config/admission", want.GetKind())
	}

	r = mustRender(t, "") // helm's defaults name no kinds: as a cluster without the API
	g.Expect(r.ofKind("Deployment")).NotTo(BeEmpty())
	g.Expect(r.ofKind("MutatingAdmissionPolicy")).To(BeEmpty(), "a cluster without the API gets no policy")
	g.Expect(r.ofKind("MutatingAdmissionPolicyBinding")).To(BeEmpty())
}
