package render

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/globallimit"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

// Default resources of a controller container when the spec sets none.
var defaultResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	},
}

// ImageDefaults are the operator's image settings.
type ImageDefaults struct {
	// Registry prefixes the default image: <registry>/<name>-controller:<tag>.
	Registry string
	// Tag of the default image, normally the operator's version.
	Tag string
	// RelatedImages maps RELATED_IMAGE_<NAME>_CONTROLLER variables to images.
	RelatedImages map[string]string
}

// Image resolves a controller's image: the spec override, else the
// RELATED_IMAGE_* variable, else the registry default.
func Image(entry catalog.Entry, spec operatorv1alpha1.ControllerSpec, defaults ImageDefaults) string {
	if spec.Image != "" {
		return spec.Image
	}
	if img := defaults.RelatedImages[entry.RelatedImageEnv()]; img != "" {
		return img
	}
	registry := strings.TrimSuffix(defaults.Registry, "/")
	if registry == "" {
		return entry.Binary() + ":" + defaults.Tag
	}
	return fmt.Sprintf("%s/%s:%s", registry, entry.Binary(), defaults.Tag)
}

// Owner identifies the APIGateway that owns managed Deployments.
type Owner struct {
	Name string
	UID  types.UID
}

// Input is everything a controller's Deployment is rendered from.
type Input struct {
	Entry     catalog.Entry
	Spec      operatorv1alpha1.ControllerSpec
	Namespace string
	Image     string
	Owner     Owner
	// Global is spec.rateLimits.global, set for the rate-limit service
	// (which runs only with it) and for the ratelimit controller while the
	// rate-limit service runs; nil otherwise.
	Global *operatorv1alpha1.GlobalRateLimitsSpec
	// RedisPort is the port of the Redis Secret's address, which the
	// rate-limit service's NetworkPolicy lets it reach.
	RedisPort int32
}

// binaryOf is the binary (Deployment) name of the named controller.
func binaryOf(name operatorv1alpha1.ControllerName) string {
	if c, ok := contract.ControllerNamed(name); ok {
		return c.Binary()
	}
	return contract.Controller{Name: name}.Binary()
}

// Labels returns the contract labels of a controller's managed objects.
func Labels(name operatorv1alpha1.ControllerName) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":         binaryOf(name),
		"app.kubernetes.io/part-of":      operatorv1alpha1.PartOf,
		"app.kubernetes.io/managed-by":   operatorv1alpha1.ManagedBy,
		operatorv1alpha1.LabelController: string(name),
	}
}

// SelectorLabels are the immutable Deployment selector of a controller.
func SelectorLabels(name operatorv1alpha1.ControllerName) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":         binaryOf(name),
		operatorv1alpha1.LabelController: string(name),
	}
}

// Replicas returns the spec's replicas, defaulting to 1.
func Replicas(spec operatorv1alpha1.ControllerSpec) int32 {
	if spec.Replicas == nil {
		return 1
	}
	return *spec.Replicas
}

// Deployment renders the desired Deployment of one controller.
func Deployment(in Input) *appsv1ac.DeploymentApplyConfiguration {
	labels := Labels(in.Entry.Name)
	return appsv1ac.Deployment(in.Entry.Binary(), in.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(in.Owner)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(Replicas(in.Spec)).
			WithRevisionHistoryLimit(3).
			WithProgressDeadlineSeconds(in.Entry.ProgressDeadlineSeconds).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(in.Entry.Name))).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(0)).
					WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(podTemplate(in, labels)))
}

// ownerReference makes the owning APIGateway the controller of an object.
func ownerReference(owner Owner) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(operatorv1alpha1.GroupVersion.String()).
		WithKind("APIGateway").
		WithName(owner.Name).
		WithUID(owner.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// podTemplate renders the controller's pod: its service account, security
// context and the scheduling settings of the spec.
func podTemplate(in Input, labels map[string]string) *corev1ac.PodTemplateSpecApplyConfiguration {
	podSpec := corev1ac.PodSpec().
		WithServiceAccountName(in.Entry.Binary()).
		WithAutomountServiceAccountToken(true).
		WithTerminationGracePeriodSeconds(contract.TerminationGracePeriodSeconds).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container(in))
	podSpec.WithVolumes(volumes(in)...)
	if len(in.Spec.NodeSelector) > 0 {
		podSpec.WithNodeSelector(in.Spec.NodeSelector)
	}
	for i := range in.Spec.Tolerations {
		podSpec.WithTolerations(toleration(in.Spec.Tolerations[i]))
	}
	if in.Spec.Affinity != nil {
		podSpec.WithAffinity(affinity(in.Spec.Affinity))
	}
	if in.Spec.PriorityClassName != "" {
		podSpec.WithPriorityClassName(in.Spec.PriorityClassName)
	}
	podSpec.WithTopologySpreadConstraints(topologySpread(in)...)
	podSpec.WithImagePullSecrets(imagePullSecrets(in.Spec)...)

	template := corev1ac.PodTemplateSpec().
		WithLabels(labels).
		WithSpec(podSpec)
	if len(in.Spec.PodAnnotations) > 0 {
		template.WithAnnotations(in.Spec.PodAnnotations)
	}
	return template
}

// container renders the controller's container.
func container(in Input) *corev1ac.ContainerApplyConfiguration {
	resources := defaultResources
	if in.Spec.Resources != nil {
		resources = *in.Spec.Resources
	}
	return corev1ac.Container().
		WithName(contract.ContainerName).
		WithImage(in.Image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs(containerArgs(in)...).
		WithEnv(containerEnv(in.Spec.Env)...).
		WithPorts(containerPorts(in)...).
		WithVolumeMounts(volumeMounts(in)...).
		WithResources(resourcesApply(resources)).
		WithLivenessProbe(probe(contract.HealthzPath, 15, 20)).
		WithReadinessProbe(probe(contract.ReadyzPath, 5, 10)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
}

// containerArgs are the contract flags every controller gets, then the
// catalog entry's own, then the spec's extraArgs (which Refusal checked:
// none of them overrides a flag the operator sets).
func containerArgs(in Input) []string {
	logLevel := in.Spec.LogLevel
	if logLevel == "" {
		logLevel = operatorv1alpha1.LogLevelInfo
	}
	args := []string{
		contract.Flag(contract.FlagMetricsAddress, fmt.Sprintf(":%d", contract.MetricsPort)),
		contract.Flag(contract.FlagHealthAddress, fmt.Sprintf(":%d", in.Entry.HealthPortOf())),
		contract.Flag(contract.FlagLeaderElect, "true"),
		contract.Flag(contract.FlagLogLevel, string(logLevel)),
	}
	args = append(args, in.Entry.Args...)
	args = append(args, globalRateLimitArgs(in)...)
	return append(args, in.Spec.ExtraArgs...)
}

// containerEnv is POD_NAMESPACE and PORTICO_MEMORY_LIMIT from the
// downward API, then the spec's variables except those of the reserved
// names. A user who wants another soft memory limit sets GOMEMLIMIT, which
// the controller keeps.
func containerEnv(specEnv []corev1.EnvVar) []*corev1ac.EnvVarApplyConfiguration {
	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName(contract.EnvPodNamespace).WithValueFrom(
			corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath("metadata.namespace"))),
		// Bytes (the default divisor, 1); the API server would default the
		// divisor, so it is set here to keep the apply comparison stable.
		corev1ac.EnvVar().WithName(contract.EnvMemoryLimit).WithValueFrom(
			corev1ac.EnvVarSource().WithResourceFieldRef(corev1ac.ResourceFieldSelector().
				WithContainerName(contract.ContainerName).WithResource("limits.memory").WithDivisor(resource.MustParse("1")))),
	}
	for i := range specEnv {
		switch specEnv[i].Name {
		case contract.EnvPodNamespace, contract.EnvMemoryLimit:
			continue // reserved: leader election and the heap's bound depend on them
		}
		env = append(env, envVar(specEnv[i]))
	}
	return env
}

// containerPorts are the metrics and health ports, and the rate-limit
// service's gRPC port.
func containerPorts(in Input) []*corev1ac.ContainerPortApplyConfiguration {
	ports := []*corev1ac.ContainerPortApplyConfiguration{
		corev1ac.ContainerPort().WithName(MetricsPortName).WithContainerPort(contract.MetricsPort).WithProtocol(corev1.ProtocolTCP),
		corev1ac.ContainerPort().WithName(HealthPortName).WithContainerPort(in.Entry.HealthPortOf()).WithProtocol(corev1.ProtocolTCP),
	}
	if servesGlobalRateLimits(in) {
		ports = append(ports, corev1ac.ContainerPort().WithName(globallimit.GRPCPortName).WithContainerPort(globallimit.GRPCPort).WithProtocol(corev1.ProtocolTCP))
	}
	return ports
}

func probe(path string, initialDelay, period int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString(HealthPortName))).
		WithInitialDelaySeconds(initialDelay).
		WithPeriodSeconds(period)
}

func resourcesApply(r corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	out := corev1ac.ResourceRequirements()
	if len(r.Limits) > 0 {
		out.WithLimits(r.Limits)
	}
	if len(r.Requests) > 0 {
		out.WithRequests(r.Requests)
	}
	for _, c := range r.Claims {
		out.WithClaims(corev1ac.ResourceClaim().WithName(c.Name).WithRequest(c.Request))
	}
	return out
}
