package render

import (
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

var (
	rateLimitService, _ = catalog.Builtin.Get(operatorv1alpha1.ControllerRateLimitService)
	rateLimit, _        = catalog.Builtin.Get(operatorv1alpha1.ControllerRateLimit)
)

func global(mutate ...func(*operatorv1alpha1.GlobalRateLimitsSpec)) *operatorv1alpha1.GlobalRateLimitsSpec {
	g := &operatorv1alpha1.GlobalRateLimitsSpec{Redis: operatorv1alpha1.RedisSpec{SecretName: "redis"}}
	for _, m := range mutate {
		m(g)
	}
	return g
}

func serviceInput(spec operatorv1alpha1.ControllerSpec, g *operatorv1alpha1.GlobalRateLimitsSpec) Input {
	spec.Name = operatorv1alpha1.ControllerRateLimitService
	return Input{Entry: rateLimitService, Spec: spec, Namespace: "portico-system", Image: "img:1",
		Owner: Owner{Name: "default", UID: "uid-1"}, Global: g, RedisPort: 6380}
}

func TestGlobalRateLimitArgs(t *testing.T) {
	standard := []string{"--metrics-bind-address=:8080", "--leader-elect=true", "--log-level=info"}
	tests := map[string]struct {
		in   Input
		want []string
	}{
		"ratelimit controller without the service: no global flags": {
			in:   Input{Entry: rateLimit},
			want: append(append([]string{}, standard[0], "--health-probe-bind-address=:8081"), standard[1:]...),
		},
		"ratelimit controller with the service: defaults": {
			in: Input{Entry: rateLimit, Global: global()},
			want: append(append([]string{}, standard[0], "--health-probe-bind-address=:8081"), append(standard[1:],
				"--global-ratelimit=true", "--global-ratelimit-fail-open=true", "--global-ratelimit-timeout=100ms")...),
		},
		"ratelimit controller fails closed with its timeout": {
			in: Input{Entry: rateLimit, Global: global(func(g *operatorv1alpha1.GlobalRateLimitsSpec) {
				g.FailOpen, g.Timeout = ptr.To(false), &metav1.Duration{Duration: 1500 * time.Millisecond}
			})},
			want: append(append([]string{}, standard[0], "--health-probe-bind-address=:8081"), append(standard[1:],
				"--global-ratelimit=true", "--global-ratelimit-fail-open=false", "--global-ratelimit-timeout=1.5s")...),
		},
		"service: probes on 8082, gRPC on 8081, Redis settings": {
			in: serviceInput(operatorv1alpha1.ControllerSpec{}, global()),
			want: append(append([]string{}, standard[0], "--health-probe-bind-address=:8082"), append(standard[1:],
				"--grpc-bind-address=:8081", "--redis-config-dir=/etc/portico/redis", "--redis-tls=false", "--max-keys-per-rule=10000")...),
		},
		"service with TLS and its key bound, then extraArgs": {
			in: serviceInput(operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--kube-api-qps=50"}}, global(func(g *operatorv1alpha1.GlobalRateLimitsSpec) {
				g.Redis.TLS, g.MaxKeysPerRule = true, ptr.To[int32](500)
			})),
			want: append(append([]string{}, standard[0], "--health-probe-bind-address=:8082"), append(standard[1:],
				"--grpc-bind-address=:8081", "--redis-config-dir=/etc/portico/redis", "--redis-tls=true", "--max-keys-per-rule=500", "--kube-api-qps=50")...),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(containerArgs(tc.in)).To(Equal(tc.want))
		})
	}
}

func TestRateLimitServiceDeployment(t *testing.T) {
	g := NewWithT(t)
	d := Deployment(serviceInput(operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](3)}, global()))
	g.Expect(*d.Name).To(Equal("portico-ratelimit-service"))
	g.Expect(d.Labels["app.kubernetes.io/name"]).To(Equal("portico-ratelimit-service"))
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{
		"app.kubernetes.io/name": "portico-ratelimit-service", "operator.portico.dev/controller": "ratelimitservice",
	}))
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3), "spec.controllers[] overrides apply to the service")
	pod := d.Spec.Template.Spec
	g.Expect(*pod.ServiceAccountName).To(Equal("portico-ratelimit-service"))
	g.Expect(pod.Volumes).To(HaveLen(1))
	g.Expect(*pod.Volumes[0].Name).To(Equal("redis"))
	g.Expect(*pod.Volumes[0].Secret.SecretName).To(Equal("redis"))
	g.Expect(*pod.Volumes[0].Secret.DefaultMode).To(BeEquivalentTo(0o444))
	c := pod.Containers[0]
	g.Expect(c.VolumeMounts).To(HaveLen(1))
	g.Expect(*c.VolumeMounts[0].MountPath).To(Equal("/etc/portico/redis"))
	g.Expect(*c.VolumeMounts[0].ReadOnly).To(BeTrue())
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[*p.Name] = *p.ContainerPort
	}
	g.Expect(ports).To(Equal(map[string]int32{"metrics": 8080, "health": 8082, "grpc-rls": 8081}))
	g.Expect(c.ReadinessProbe.HTTPGet.Port.StrVal).To(Equal("health"))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(c.Env).To(HaveLen(2), "POD_NAMESPACE and PORTICO_MEMORY_LIMIT, the Redis Secret is not in the environment")

	budget := DisruptionBudget(serviceInput(operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](3)}, global()))
	g.Expect(budget).NotTo(BeNil())
	g.Expect(*budget.Name).To(Equal("portico-ratelimit-service"))
}

func TestOtherControllersHaveNoServiceNorVolumes(t *testing.T) {
	g := NewWithT(t)
	for _, in := range []Input{input(operatorv1alpha1.ControllerSpec{}), {Entry: rateLimit, Global: global()}} {
		d := Deployment(in)
		g.Expect(d.Spec.Template.Spec.Volumes).To(BeEmpty())
		g.Expect(d.Spec.Template.Spec.Containers[0].VolumeMounts).To(BeEmpty())
		g.Expect(d.Spec.Template.Spec.Containers[0].Ports).To(HaveLen(2))
		g.Expect(Service(in)).To(BeNil())
	}
}

func TestRateLimitServiceService(t *testing.T) {
	g := NewWithT(t)
	s := Service(serviceInput(operatorv1alpha1.ControllerSpec{}, global()))
	g.Expect(s).NotTo(BeNil())
	g.Expect(*s.Name).To(Equal("portico-ratelimit-service"))
	g.Expect(*s.Namespace).To(Equal("portico-system"))
	g.Expect(s.OwnerReferences).To(HaveLen(1))
	g.Expect(*s.OwnerReferences[0].Kind).To(Equal("APIGateway"))
	g.Expect(*s.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
	g.Expect(s.Spec.Selector).To(Equal(SelectorLabels(operatorv1alpha1.ControllerRateLimitService)))
	g.Expect(s.Spec.Ports).To(HaveLen(1))
	p := s.Spec.Ports[0]
	g.Expect(*p.Name).To(Equal("grpc-rls"))
	g.Expect(*p.Port).To(BeEquivalentTo(8081))
	g.Expect(*p.AppProtocol).To(Equal("grpc"))
	g.Expect(p.TargetPort.StrVal).To(Equal("grpc-rls"))

	g.Expect(Service(serviceInput(operatorv1alpha1.ControllerSpec{}, nil))).To(BeNil(), "no configuration, no Service")
}

func TestRateLimitServiceNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	api := APIServer{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Ports: []int32{6443}}
	np := NetworkPolicy(serviceInput(operatorv1alpha1.ControllerSpec{}, global()), api, []string{"monitoring"})
	g.Expect(np).NotTo(BeNil())
	g.Expect(*np.Name).To(Equal("portico-ratelimit-service"))
	g.Expect(np.Spec.Egress).To(HaveLen(3))
	redis := np.Spec.Egress[2]
	g.Expect(redis.To).To(BeEmpty(), "Redis may be anywhere")
	g.Expect(redis.Ports).To(HaveLen(1))
	g.Expect(redis.Ports[0].Port.IntValue()).To(Equal(6380))
	g.Expect(np.Spec.Ingress).To(HaveLen(2))
	grpc := np.Spec.Ingress[0]
	g.Expect(grpc.Ports[0].Port.StrVal).To(Equal("grpc-rls"))
	g.Expect(grpc.From).To(HaveLen(1))
	g.Expect(grpc.From[0].NamespaceSelector).NotTo(BeNil())
	g.Expect(grpc.From[0].NamespaceSelector.MatchLabels).To(BeEmpty(), "every namespace's pods")
	g.Expect(grpc.From[0].NamespaceSelector.MatchExpressions).To(BeEmpty())
	g.Expect(np.Spec.Ingress[1].Ports[0].Port.StrVal).To(Equal("metrics"))

	other := NetworkPolicy(Input{Entry: rateLimit, Global: global(), Namespace: "portico-system"}, api, nil)
	g.Expect(other.Spec.Egress).To(HaveLen(2))
	g.Expect(other.Spec.Ingress).To(BeEmpty())
}

func TestGlobalRateLimitFlagsAreReserved(t *testing.T) {
	tests := map[string]struct {
		entry   catalog.Entry
		arg     string
		refused string
	}{
		"ratelimit: global on":        {entry: rateLimit, arg: "--global-ratelimit=false", refused: "set by the operator"},
		"ratelimit: fail open":        {entry: rateLimit, arg: "--global-ratelimit-fail-open=false", refused: "set by the operator"},
		"ratelimit: timeout":          {entry: rateLimit, arg: "--global-ratelimit-timeout=1s", refused: "set by the operator"},
		"service: redis TLS":          {entry: rateLimitService, arg: "--redis-tls=true", refused: "set by the operator"},
		"service: gRPC address":       {entry: rateLimitService, arg: "--grpc-bind-address=:9000", refused: "set by the operator"},
		"service: a runner flag":      {entry: rateLimitService, arg: "--kube-api-qps=10"},
		"apirule: not its flag":       {entry: apirule, arg: "--global-ratelimit=true", refused: "is not a flag of apirule-controller"},
		"service: keys per rule too":  {entry: rateLimitService, arg: "--max-keys-per-rule=5", refused: "set by the operator"},
		"service: config dir too":     {entry: rateLimitService, arg: "--redis-config-dir=/tmp", refused: "set by the operator"},
		"ratelimit: its runner flags": {entry: rateLimit, arg: "--kube-api-burst=10"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			message, refused := Refusal(tc.entry, operatorv1alpha1.ControllerSpec{ExtraArgs: []string{tc.arg}})
			g.Expect(refused).To(Equal(tc.refused != ""), message)
			g.Expect(message).To(ContainSubstring(tc.refused))
		})
	}
}
