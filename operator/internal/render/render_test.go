package render

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

var apirule, _ = catalog.Builtin.Get(operatorv1alpha1.ControllerAPIRule)

func TestImage(t *testing.T) {
	defaults := ImageDefaults{Registry: "registry.example/portico/", Tag: "v1.2.3"}
	withRelated := defaults
	withRelated.RelatedImages = map[string]string{"RELATED_IMAGE_APIRULE_CONTROLLER": "mirror.local/apirule@sha256:abc"}
	tests := map[string]struct {
		spec     operatorv1alpha1.ControllerSpec
		defaults ImageDefaults
		want     string
	}{
		"registry default":                   {defaults: defaults, want: "registry.example/portico/apirule-controller:v1.2.3"},
		"related image overrides default":    {defaults: withRelated, want: "mirror.local/apirule@sha256:abc"},
		"spec image overrides related image": {spec: operatorv1alpha1.ControllerSpec{Image: "air.gap/apirule:x"}, defaults: withRelated, want: "air.gap/apirule:x"},
		"no registry":                        {defaults: ImageDefaults{Tag: "dev"}, want: "apirule-controller:dev"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Image(apirule, tc.spec, tc.defaults)).To(Equal(tc.want))
		})
	}
}

func input(spec operatorv1alpha1.ControllerSpec) Input {
	spec.Name = operatorv1alpha1.ControllerAPIRule
	return Input{Entry: apirule, Spec: spec, Namespace: "portico-system", Image: "img:1", Owner: Owner{Name: "default", UID: "uid-1"}}
}

func TestDeploymentIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	spec := operatorv1alpha1.ControllerSpec{
		NodeSelector:   map[string]string{"b": "2", "a": "1", "c": "3"},
		PodAnnotations: map[string]string{"z": "1", "y": "2"},
		Env:            []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}},
	}
	first, err := json.Marshal(Deployment(input(spec)))
	g.Expect(err).NotTo(HaveOccurred())
	for range 20 {
		again, err := json.Marshal(Deployment(input(spec)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(again)).To(Equal(string(first)))
	}
}

func TestDeploymentDefaults(t *testing.T) {
	g := NewWithT(t)
	d := Deployment(input(operatorv1alpha1.ControllerSpec{}))

	g.Expect(*d.Name).To(Equal("apirule-controller"))
	g.Expect(*d.Namespace).To(Equal("portico-system"))
	g.Expect(d.Labels).To(Equal(map[string]string{
		"app.kubernetes.io/name":          "apirule-controller",
		"app.kubernetes.io/part-of":       "portico",
		"app.kubernetes.io/managed-by":    "portico-operator",
		"operator.portico.dev/controller": "apirule",
	}))
	g.Expect(d.OwnerReferences).To(HaveLen(1))
	g.Expect(*d.OwnerReferences[0].Kind).To(Equal("APIGateway"))
	g.Expect(*d.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(string(*d.OwnerReferences[0].UID)).To(Equal("uid-1"))

	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(1))
	g.Expect(d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(Equal(0))
	g.Expect(d.Spec.Template.Labels).To(Equal(d.Labels))
	g.Expect(d.Spec.Selector.MatchLabels).To(HaveKeyWithValue("operator.portico.dev/controller", "apirule"))

	pod := d.Spec.Template.Spec
	g.Expect(*pod.ServiceAccountName).To(Equal("apirule-controller"))
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(pod.NodeSelector).To(BeEmpty())

	c := pod.Containers[0]
	g.Expect(*c.Image).To(Equal("img:1"))
	g.Expect(c.Args).To(Equal([]string{"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--leader-elect=true", "--log-level=info"}))
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(*c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(*c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(c.LivenessProbe.HTTPGet.Port.String()).To(Equal("health"))
	g.Expect(c.Resources.Requests.Memory().String()).To(Equal("64Mi"))
	g.Expect(c.Env).To(HaveLen(2))
	g.Expect(*c.Env[0].Name).To(Equal(contract.EnvPodNamespace))
	g.Expect(*c.Env[1].Name).To(Equal(contract.EnvMemoryLimit))
	memory := c.Env[1].ValueFrom.ResourceFieldRef
	g.Expect(*memory.ContainerName).To(Equal(*c.Name))
	g.Expect(*memory.Resource).To(Equal("limits.memory"))
	g.Expect(memory.Divisor.String()).To(Equal("1"), "in bytes, as internal/memlimit parses it")
}

func TestDeploymentOverrides(t *testing.T) {
	g := NewWithT(t)
	spec := operatorv1alpha1.ControllerSpec{
		Replicas: ptr.To[int32](0),
		LogLevel: operatorv1alpha1.LogLevelDebug,
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")},
		},
		NodeSelector:      map[string]string{"pool": "system"},
		Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gw", Effect: corev1.TaintEffectNoSchedule}},
		Affinity:          &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}},
		PriorityClassName: "system-cluster-critical",
		Env:               []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}, {Name: contract.EnvPodNamespace, Value: "spoofed"}, {Name: contract.EnvMemoryLimit, Value: "1"}, {Name: "GOMEMLIMIT", Value: "900MiB"}},
		PodAnnotations:    map[string]string{"sidecar.istio.io/inject": "false"},
	}
	d := Deployment(input(spec))
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(0))
	g.Expect(c.Args).To(ContainElement("--log-level=debug"))
	g.Expect(c.Resources.Requests.Cpu().String()).To(Equal("500m"))
	g.Expect(c.Resources.Limits).To(BeNil(), "a resources override replaces the defaults entirely")
	g.Expect(pod.NodeSelector).To(Equal(map[string]string{"pool": "system"}))
	g.Expect(pod.Tolerations).To(HaveLen(1))
	g.Expect(*pod.Tolerations[0].Key).To(Equal("dedicated"))
	g.Expect(pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values).To(Equal([]string{"a"}))
	g.Expect(*pod.PriorityClassName).To(Equal("system-cluster-critical"))
	g.Expect(d.Spec.Template.Annotations).To(Equal(map[string]string{"sidecar.istio.io/inject": "false"}))

	var names []string
	for _, e := range c.Env {
		names = append(names, *e.Name)
	}
	g.Expect(names).To(Equal([]string{contract.EnvPodNamespace, contract.EnvMemoryLimit, "HTTPS_PROXY", "GOMEMLIMIT"}),
		"POD_NAMESPACE and PORTICO_MEMORY_LIMIT are reserved and not overridable; GOMEMLIMIT is the user's")
	g.Expect(c.Env[0].ValueFrom).NotTo(BeNil())
	g.Expect(c.Env[1].ValueFrom.ResourceFieldRef).NotTo(BeNil())
}
