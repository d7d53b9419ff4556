package render

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/globallimit"
)

// RedisVolumeName is the rate-limit service's volume of the Redis Secret.
const RedisVolumeName = "redis"

// redisSecretMode makes the Secret's files readable by the container's
// non-root user without an fsGroup; the pod runs one process. Set so the
// server's default (0644) does not differ from the rendering.
const redisSecretMode = 0o444

// servesGlobalRateLimits reports whether the input renders the rate-limit
// service (which runs only with spec.rateLimits.global).
func servesGlobalRateLimits(in Input) bool {
	return in.Entry.NeedsGlobalRateLimits && in.Global != nil
}

// globalRateLimitArgs are the flags of spec.rateLimits.global: the
// rate-limit service's (gRPC address, Redis Secret directory, TLS, keys per
// rule), and the ratelimit controller's while the service runs (the global
// filters on, fail open or closed, the decision timeout).
func globalRateLimitArgs(in Input) []string {
	switch {
	case in.Global == nil:
		return nil
	case in.Entry.NeedsGlobalRateLimits:
		return []string{
			contract.Flag(contract.FlagGRPCAddress, fmt.Sprintf(":%d", globallimit.GRPCPort)),
			contract.Flag(contract.FlagRedisConfigDir, contract.RedisConfigDir),
			contract.Flag(contract.FlagRedisTLS, strconv.FormatBool(in.Global.Redis.TLS)),
			contract.Flag(contract.FlagMaxKeysPerRule, strconv.Itoa(int(in.Global.KeysPerRule()))),
		}
	case in.Entry.Name == operatorv1alpha1.ControllerRateLimit:
		return []string{
			contract.Flag(contract.FlagGlobalRateLimit, "true"),
			contract.Flag(contract.FlagGlobalRateLimitFailOpen, strconv.FormatBool(in.Global.FailsOpen())),
			contract.Flag(contract.FlagGlobalRateLimitTimeout, in.Global.DecisionTimeout().String()),
		}
	}
	return nil
}

// volumes are the rate-limit service's Redis Secret, read-only: a volume,
// not environment variables, so a rotated password reaches the running
// pods (the kubelet refreshes the files; the service re-reads them).
func volumes(in Input) []*corev1ac.VolumeApplyConfiguration {
	if !servesGlobalRateLimits(in) {
		return nil
	}
	return []*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().
		WithName(RedisVolumeName).
		WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(in.Global.Redis.SecretName).
			WithDefaultMode(redisSecretMode))}
}

func volumeMounts(in Input) []*corev1ac.VolumeMountApplyConfiguration {
	if !servesGlobalRateLimits(in) {
		return nil
	}
	return []*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().
		WithName(RedisVolumeName).
		WithMountPath(contract.RedisConfigDir).
		WithReadOnly(true)}
}

// Service renders the rate-limit service's Service, globallimit.ServiceName
// (ClusterIP, gRPC port globallimit.GRPCPort selecting its pods), owned by
// the APIGateway like its Deployment; nil for every other component.
func Service(in Input) *corev1ac.ServiceApplyConfiguration {
	if !servesGlobalRateLimits(in) {
		return nil
	}
	return corev1ac.Service(globallimit.ServiceName, in.Namespace).
		WithLabels(Labels(in.Entry.Name)).
		WithOwnerReferences(ownerReference(in.Owner)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(SelectorLabels(in.Entry.Name)).
			WithPorts(corev1ac.ServicePort().
				WithName(globallimit.GRPCPortName).
				WithProtocol(corev1.ProtocolTCP).
				WithAppProtocol("grpc").
				WithPort(globallimit.GRPCPort).
				WithTargetPort(intstr.FromString(globallimit.GRPCPortName))))
}

// globalRateLimitIngress lets any pod of any namespace reach the rate-limit
// service's gRPC port: the gateways that call it may run anywhere, and the
// tenant token of each descriptor (globallimit.Token), not the network,
// keeps one tenant from another's budgets.
func globalRateLimitIngress(in Input) []*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration {
	if !servesGlobalRateLimits(in) {
		return nil
	}
	return []*networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration{networkingv1ac.NetworkPolicyIngressRule().
		WithPorts(port(corev1.ProtocolTCP, intstr.FromString(globallimit.GRPCPortName))).
		WithFrom(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector()))}
}

// globalRateLimitEgress lets the rate-limit service reach Redis: the port of
// the Secret's address, any destination (Redis may run outside the
// cluster, behind a name whose addresses change).
func globalRateLimitEgress(in Input) []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration {
	if !servesGlobalRateLimits(in) || in.RedisPort == 0 {
		return nil
	}
	return []*networkingv1ac.NetworkPolicyEgressRuleApplyConfiguration{networkingv1ac.NetworkPolicyEgressRule().
		WithPorts(port(corev1.ProtocolTCP, intstr.FromInt32(in.RedisPort)))}
}
