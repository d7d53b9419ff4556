package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/testenv"
)

var (
	env       *testenv.Env
	k8sClient client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.RunInput{Setup: func(_ context.Context, e *testenv.Env) error {
		env, k8sClient = e, e.Client
		return nil
	}}))
}

func gateway(name string, controllers ...operatorv1alpha1.ControllerSpec) *operatorv1alpha1.APIGateway {
	return &operatorv1alpha1.APIGateway{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       operatorv1alpha1.APIGatewaySpec{Controllers: controllers},
	}
}

func grant(host string, namespaces ...string) *operatorv1alpha1.APIGateway {
	gw := gateway("default")
	gw.Spec.APIRules = &operatorv1alpha1.APIRulesSpec{WildcardHosts: []operatorv1alpha1.WildcardHostGrant{{Host: host, Namespaces: namespaces}}}
	return gw
}

func TestGrants(t *testing.T) {
	g := NewWithT(t)
	spec := &operatorv1alpha1.APIRulesSpec{WildcardHosts: []operatorv1alpha1.WildcardHostGrant{
		{Host: "*.a.example.com", Namespaces: []string{"team-a"}}, {Host: "*.shared.example.com", Namespaces: []string{"*"}},
	}}
	g.Expect(spec.Grants("*.a.example.com", "team-a")).To(BeTrue())
	g.Expect(spec.Grants("*.a.example.com", "team-b")).To(BeFalse())
	g.Expect(spec.Grants("*.example.com", "team-a")).To(BeFalse(), "a grant is for its exact host only")
	g.Expect(spec.Grants("*.shared.example.com", "anyone")).To(BeTrue())
	var none *operatorv1alpha1.APIRulesSpec
	g.Expect(none.Grants("*.a.example.com", "team-a")).To(BeFalse())
}

func authorizerGrant(name string, namespaces ...string) *operatorv1alpha1.APIGateway {
	gw := gateway("default")
	gw.Spec.APIRules = &operatorv1alpha1.APIRulesSpec{ExtAuthProviders: []operatorv1alpha1.ExtAuthProviderGrant{{Name: name, Namespaces: namespaces}}}
	return gw
}

func TestAuthorizerGrants(t *testing.T) {
	g := NewWithT(t)
	spec := &operatorv1alpha1.APIRulesSpec{ExtAuthProviders: []operatorv1alpha1.ExtAuthProviderGrant{
		{Name: "team-a-authz", Namespaces: []string{"team-a"}}, {Name: "shared-authz", Namespaces: []string{"*"}},
	}}
	g.Expect(spec.GrantsAuthorizer("team-a-authz", "team-a")).To(BeTrue())
	g.Expect(spec.GrantsAuthorizer("team-a-authz", "team-b")).To(BeFalse())
	g.Expect(spec.GrantsAuthorizer("unlisted", "team-a")).To(BeFalse(), "an authorizer nobody listed is granted to nobody")
	g.Expect(spec.GrantsAuthorizer("shared-authz", "anyone")).To(BeTrue())
	var none *operatorv1alpha1.APIRulesSpec
	g.Expect(none.GrantsAuthorizer("shared-authz", "team-a")).To(BeFalse())

	g.Expect(k8sClient.Create(context.Background(), authorizerGrant("ext-authz-grpc", "team-a", "*"), client.DryRunAll)).To(Succeed())
	// Istio refuses provider names that are not DNS labels (a dot) and
	// denies the requests of a CUSTOM policy naming one (test/istio).
	g.Expect(k8sClient.Create(context.Background(), authorizerGrant("ext-authz.grpc", "team-a"), client.DryRunAll)).
		To(MatchError(ContainSubstring("spec.apiRules.extAuthProviders[0].name in body should match")))
}

func withGateway(spec operatorv1alpha1.GatewaySpec) *operatorv1alpha1.APIGateway {
	gw := gateway("default")
	gw.Spec.Gateway = &spec
	return gw
}

func TestAPIGatewayValidation(t *testing.T) {
	tests := map[string]struct {
		obj     *operatorv1alpha1.APIGateway
		wantErr string
	}{
		"a name other than default": {
			obj:     gateway("production"),
			wantErr: "only one APIGateway is allowed per cluster and it must be named 'default'",
		},
		"eleven replicas": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", Replicas: ptr.To[int32](11)}),
			wantErr: "spec.controllers[0].replicas: Invalid value: 11: spec.controllers[0].replicas in body should be less than or equal to 10",
		},
		"negative replicas": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", Replicas: ptr.To[int32](-1)}),
			wantErr: "should be greater than or equal to 0",
		},
		"unknown controller": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "oauth2"}),
			wantErr: `spec.controllers[0].name: Unsupported value: "oauth2": supported values: "apirule", "ratelimit"`,
		},
		"unknown log level": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", LogLevel: "verbose"}),
			wantErr: `spec.controllers[0].logLevel: Unsupported value: "verbose": supported values: "debug", "info", "error"`,
		},
		"the same controller twice": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule"}, operatorv1alpha1.ControllerSpec{Name: "apirule"}),
			wantErr: `spec.controllers[1]: Duplicate value: {"name":"apirule"}`,
		},
		"an exact host as a wildcard grant": {
			obj:     grant("api.example.com", "team-a"),
			wantErr: `spec.apiRules.wildcardHosts[0].host in body should match`,
		},
		"a wildcard grant to no namespace": {
			obj:     grant("*.example.com"),
			wantErr: "spec.apiRules.wildcardHosts[0].namespaces: Required value",
		},
		"a wildcard grant to a bad namespace name": {
			obj:     grant("*.example.com", "Team_A"),
			wantErr: "spec.apiRules.wildcardHosts[0].namespaces[0] in body should match",
		},
		"an authorizer grant to no namespace": {
			obj:     authorizerGrant("ext-authz"),
			wantErr: "spec.apiRules.extAuthProviders[0].namespaces: Required value",
		},
		"an authorizer with an odd name": {
			obj:     authorizerGrant("Ext Authz", "team-a"),
			wantErr: "spec.apiRules.extAuthProviders[0].name in body should match",
		},
		"an authorizer granted to a bad namespace name": {
			obj:     authorizerGrant("ext-authz", "Team_A"),
			wantErr: "spec.apiRules.extAuthProviders[0].namespaces[0] in body should match",
		},
		"a gateway without a domain": {
			obj:     withGateway(operatorv1alpha1.GatewaySpec{}),
			wantErr: "spec.gateway.domain is required while the gateway is enabled",
		},
		"a wildcard domain": {
			obj:     withGateway(operatorv1alpha1.GatewaySpec{Domain: "*.example.com"}),
			wantErr: "domain must be a lower-case DNS name with at least two labels",
		},
		"a one-label domain": {
			obj:     withGateway(operatorv1alpha1.GatewaySpec{Domain: "localhost"}),
			wantErr: "domain must be a lower-case DNS name with at least two labels",
		},
		"two certificate sources": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", Certificate: &operatorv1alpha1.GatewayCertificate{
				SelfSigned: &operatorv1alpha1.SelfSignedCertificate{}, SecretName: "mine",
			}}),
			wantErr: "set exactly one certificate source: selfSigned, certManager or secretName",
		},
		"no certificate source": {
			obj:     withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", Certificate: &operatorv1alpha1.GatewayCertificate{}}),
			wantErr: "set exactly one certificate source",
		},
		"client certificates with two CA bundle sources": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{
				CABundle: operatorv1alpha1.ClientCABundle{ConfigMapName: "client-ca", SecretName: "client-ca"},
			}}),
			wantErr: "set exactly one CA bundle source: configMapName or secretName",
		},
		"client certificates without a CA bundle source": {
			obj:     withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{}}),
			wantErr: "set exactly one CA bundle source",
		},
		"client certificates of an unknown mode": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{
				Mode: "Sometimes", CABundle: operatorv1alpha1.ClientCABundle{ConfigMapName: "client-ca"},
			}}),
			wantErr: `spec.gateway.clientCertificates.mode: Unsupported value: "Sometimes"`,
		},
		"a client CA bundle in the ConfigMap Portico writes": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{
				CABundle: operatorv1alpha1.ClientCABundle{ConfigMapName: "portico-gateway-client-ca"},
			}}),
			wantErr: "configMapName must not name a ConfigMap Portico writes",
		},
		"a client CA bundle from the gateway's own selfSigned CA": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{
				CABundle: operatorv1alpha1.ClientCABundle{SecretName: "portico-gateway-tls"},
			}}),
			wantErr: "secretName must not name a Secret Portico writes",
		},
		"a client CA bundle ConfigMap that is not a name": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{
				CABundle: operatorv1alpha1.ClientCABundle{ConfigMapName: "Client_CA"},
			}}),
			wantErr: "spec.gateway.clientCertificates.caBundle.configMapName in body should match",
		},
		"a client CA bundle Secret name too long": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{
				CABundle: operatorv1alpha1.ClientCABundle{SecretName: strings.Repeat("a", 254)},
			}}),
			wantErr: "spec.gateway.clientCertificates.caBundle.secretName: Too long",
		},
		"an issuer of an unknown kind": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", Certificate: &operatorv1alpha1.GatewayCertificate{
				CertManager: &operatorv1alpha1.CertManagerCertificate{IssuerRef: operatorv1alpha1.IssuerReference{Name: "le", Kind: "Vault"}},
			}}),
			wantErr: `spec.gateway.certificate.certManager.issuerRef.kind: Unsupported value: "Vault"`,
		},
		"a selfSigned validity of ten years": {
			obj: withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", Certificate: &operatorv1alpha1.GatewayCertificate{
				SelfSigned: &operatorv1alpha1.SelfSignedCertificate{Validity: &metav1.Duration{Duration: 87600 * time.Hour}},
			}}),
			wantErr: "validity must be between 1h and 8760h (one year)",
		},
		"a budget with both minAvailable and maxUnavailable": {
			obj: gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}}),
			wantErr: "set exactly one of minAvailable and maxUnavailable",
		},
		"an empty budget": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{}}),
			wantErr: "set exactly one of minAvailable and maxUnavailable",
		},
		"a budget percentage that is not one": {
			obj: gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{
				MaxUnavailable: ptr.To(intstr.FromString("half")),
			}}),
			wantErr: "spec.controllers[0].podDisruptionBudget.maxUnavailable in body should match",
		},
		"an extra argument that is not --name=value": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", ExtraArgs: []string{"--kube-api-qps=5", "--namespace", "team-a"}}),
			wantErr: "each extraArgs entry must be one flag in the form --name=value",
		},
		"a pull secret listed twice": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", ImagePullSecrets: []corev1.LocalObjectReference{{Name: "mirror"}, {Name: "mirror"}}}),
			wantErr: `spec.controllers[0].imagePullSecrets[1]: Duplicate value`,
		},
		"a metrics namespace that is not a namespace name": {
			obj:     withNetworkPolicies(operatorv1alpha1.NetworkPoliciesSpec{MetricsFromNamespaces: []string{"monitoring", "Team_A"}}),
			wantErr: "spec.networkPolicies.metricsFromNamespaces[1] in body should match",
		},
		"a metrics namespace listed twice": {
			obj:     withNetworkPolicies(operatorv1alpha1.NetworkPoliciesSpec{MetricsFromNamespaces: []string{"monitoring", "monitoring"}}),
			wantErr: "spec.networkPolicies.metricsFromNamespaces[1]: Duplicate value",
		},
		"seventeen metrics namespaces": {
			obj: withNetworkPolicies(operatorv1alpha1.NetworkPoliciesSpec{MetricsFromNamespaces: []string{
				"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}}),
			wantErr: "spec.networkPolicies.metricsFromNamespaces: Too many: 17: must have at most 16 items",
		},
		"an image with a space": {
			obj:     gateway("default", operatorv1alpha1.ControllerSpec{Name: "apirule", Image: "reg/apirule controller:1"}),
			wantErr: "image must not contain spaces",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8sClient.Create(context.Background(), tc.obj)
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func withNetworkPolicies(spec operatorv1alpha1.NetworkPoliciesSpec) *operatorv1alpha1.APIGateway {
	gw := gateway("default")
	gw.Spec.NetworkPolicies = &spec
	return gw
}

// An empty networkPolicies block turns into enabled: true; not set at all,
// the operator still writes the policies.
func TestNetworkPoliciesDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gw := withNetworkPolicies(operatorv1alpha1.NetworkPoliciesSpec{MetricsFromNamespaces: []string{"monitoring"}})
	g.Expect(k8sClient.Create(ctx, gw, client.DryRunAll)).To(Succeed())
	g.Expect(gw.Spec.NetworkPolicies.Enabled).To(Equal(ptr.To(true)))
	g.Expect(gw.Spec.NetworkPoliciesEnabled()).To(BeTrue())
	g.Expect(gw.Spec.MetricsFromNamespaces()).To(Equal([]string{"monitoring"}))

	unset := gateway("default")
	g.Expect(k8sClient.Create(ctx, unset, client.DryRunAll)).To(Succeed())
	g.Expect(unset.Spec.NetworkPolicies).To(BeNil())
	g.Expect(unset.Spec.NetworkPoliciesEnabled()).To(BeTrue())
	g.Expect(unset.Spec.MetricsFromNamespaces()).To(BeEmpty())

	off := withNetworkPolicies(operatorv1alpha1.NetworkPoliciesSpec{Enabled: ptr.To(false)})
	g.Expect(k8sClient.Create(ctx, off, client.DryRunAll)).To(Succeed())
	g.Expect(off.Spec.NetworkPoliciesEnabled()).To(BeFalse())
}

func TestGatewayDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gw := withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com"})
	g.Expect(k8sClient.Create(ctx, gw, client.DryRunAll)).To(Succeed())
	spec := gw.Spec.Gateway
	g.Expect(spec.IsEnabled()).To(BeTrue())
	g.Expect(*spec.Enabled).To(BeTrue())
	g.Expect(spec.Namespace).To(Equal("istio-system"))
	g.Expect(spec.Selector).To(Equal(map[string]string{"istio": "ingressgateway"}))
	g.Expect(spec.Certificate).NotTo(BeNil())
	g.Expect(spec.Certificate.SelfSigned).NotTo(BeNil(), "selfSigned is the default source")
	g.Expect(spec.Certificate.SelfSigned.Validity).NotTo(BeNil())
	g.Expect(spec.Certificate.SelfSigned.Validity.Duration).To(Equal(2160 * time.Hour))

	off := withGateway(operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false)})
	g.Expect(k8sClient.Create(ctx, off, client.DryRunAll)).To(Succeed(), "a disabled gateway needs no domain")
	g.Expect(off.Spec.Gateway.IsEnabled()).To(BeFalse())

	cm := withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", Certificate: &operatorv1alpha1.GatewayCertificate{
		CertManager: &operatorv1alpha1.CertManagerCertificate{IssuerRef: operatorv1alpha1.IssuerReference{Name: "le"}},
	}})
	g.Expect(k8sClient.Create(ctx, cm, client.DryRunAll)).To(Succeed())
	g.Expect(cm.Spec.Gateway.Certificate.CertManager.IssuerRef.Kind).To(Equal("Issuer"))
	g.Expect(cm.Spec.Gateway.Certificate.CertManager.IssuerRef.Group).To(Equal("cert-manager.io"))
	g.Expect(cm.Spec.Gateway.UsesCertManager()).To(BeTrue())

	mtls := withGateway(operatorv1alpha1.GatewaySpec{Domain: "example.com", ClientCertificates: &operatorv1alpha1.ClientCertificates{
		CABundle: operatorv1alpha1.ClientCABundle{ConfigMapName: "client-ca"},
	}})
	g.Expect(k8sClient.Create(ctx, mtls, client.DryRunAll)).To(Succeed())
	g.Expect(mtls.Spec.Gateway.ClientCertificates.Mode).To(Equal(operatorv1alpha1.ClientCertificateRequired), "Required is the default mode")
}

func TestSampleIsAcceptedAndDefaulted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "operator_v1alpha1_apigateway.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	sample := &operatorv1alpha1.APIGateway{}
	g.Expect(yaml.UnmarshalStrict(raw, sample)).To(Succeed())

	g.Expect(k8sClient.Create(ctx, sample)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, sample) })

	// A minimal entry gets the documented defaults from the API server.
	got := &operatorv1alpha1.APIGateway{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "default"}, got)).To(Succeed())
	got.Spec.Controllers = []operatorv1alpha1.ControllerSpec{{Name: "ratelimit"}}
	g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
	g.Expect(got.Spec.Controllers[0].Enabled).To(HaveValue(BeTrue()))
	g.Expect(got.Spec.Controllers[0].Replicas).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(got.Spec.Controllers[0].LogLevel).To(Equal(operatorv1alpha1.LogLevelInfo))
}

// The availability fields accept what the operator renders from.
func TestAvailabilityFieldsAreAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gw := gateway("default", operatorv1alpha1.ControllerSpec{
		Name: "apirule", Replicas: ptr.To[int32](3),
		PodDisruptionBudget:       &operatorv1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway}},
		ImagePullSecrets:          []corev1.LocalObjectReference{{Name: "mirror"}},
		ExtraArgs:                 []string{"--kube-api-qps=100", "--graceful-shutdown-timeout=20s"},
	})
	g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, gw) })
	got := &operatorv1alpha1.APIGateway{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(gw), got)).To(Succeed())
	g.Expect(got.Spec.Controllers[0].PodDisruptionBudget.MinAvailable).To(Equal(ptr.To(intstr.FromString("50%"))))
	g.Expect(got.Spec.Controllers[0].ExtraArgs).To(HaveLen(2))
}

func withGlobal(global *operatorv1alpha1.GlobalRateLimitsSpec) *operatorv1alpha1.APIGateway {
	gw := gateway("default")
	gw.Spec.RateLimits = &operatorv1alpha1.RateLimitsSpec{Global: global}
	return gw
}

func redis(secret string) operatorv1alpha1.RedisSpec {
	return operatorv1alpha1.RedisSpec{SecretName: secret}
}

func TestGlobalRateLimitsValidation(t *testing.T) {
	duration := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	tests := map[string]struct {
		global  *operatorv1alpha1.GlobalRateLimitsSpec
		wantErr string
	}{
		"the Secret alone":                 {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis")}},
		"every field at its upper bound":   {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: operatorv1alpha1.RedisSpec{SecretName: "redis.conn", TLS: true}, FailOpen: ptr.To(false), MaxKeysPerRule: ptr.To[int32](1_000_000), Timeout: duration(5 * time.Second)}},
		"every field at its lower bound":   {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("r"), MaxKeysPerRule: ptr.To[int32](1), Timeout: duration(10 * time.Millisecond)}},
		"a fractional second timeout":      {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), Timeout: duration(1500 * time.Millisecond)}},
		"no Secret":                        {global: &operatorv1alpha1.GlobalRateLimitsSpec{}, wantErr: "spec.rateLimits.global.redis.secretName"},
		"a Secret name that is not a name": {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("Redis_Conn")}, wantErr: "spec.rateLimits.global.redis.secretName in body should match"},
		"no keys per rule":                 {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), MaxKeysPerRule: ptr.To[int32](0)}, wantErr: "should be greater than or equal to 1"},
		"too many keys per rule":           {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), MaxKeysPerRule: ptr.To[int32](1_000_001)}, wantErr: "should be less than or equal to 1000000"},
		"a timeout too short":              {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), Timeout: duration(9 * time.Millisecond)}, wantErr: "timeout must be a duration from 10ms to 5s"},
		"a timeout too long":               {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), Timeout: duration(6 * time.Second)}, wantErr: "timeout must be a duration from 10ms to 5s"},
		"a timeout in minutes":             {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), Timeout: duration(time.Minute)}, wantErr: "timeout must be a duration from 10ms to 5s"},
		"a sub-millisecond timeout":        {global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), Timeout: duration(100*time.Millisecond + 500*time.Microsecond)}, wantErr: "timeout must be a duration from 10ms to 5s"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8sClient.Create(context.Background(), withGlobal(tc.global), client.DryRunAll)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestGlobalRateLimitsDefaults(t *testing.T) {
	g := NewWithT(t)
	gw := withGlobal(&operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis")})
	g.Expect(k8sClient.Create(context.Background(), gw, client.DryRunAll)).To(Succeed())
	global := gw.Spec.GlobalRateLimits()
	g.Expect(global).NotTo(BeNil())
	g.Expect(global.FailOpen).To(Equal(ptr.To(true)))
	g.Expect(global.MaxKeysPerRule).To(Equal(ptr.To[int32](10000)))
	g.Expect(global.Timeout).To(Equal(&metav1.Duration{Duration: 100 * time.Millisecond}))
	g.Expect(global.Redis.TLS).To(BeFalse())
	g.Expect(global.FailsOpen()).To(BeTrue())
	g.Expect(global.KeysPerRule()).To(BeEquivalentTo(10000))
	g.Expect(global.DecisionTimeout()).To(Equal(100 * time.Millisecond))

	// The accessors' defaults match the schema's, for specs the API server
	// has not defaulted (a nil global, unset fields).
	var none *operatorv1alpha1.GlobalRateLimitsSpec
	g.Expect(none.FailsOpen()).To(BeTrue())
	g.Expect(none.KeysPerRule()).To(BeEquivalentTo(10000))
	g.Expect(none.DecisionTimeout()).To(Equal(100 * time.Millisecond))
	g.Expect((&operatorv1alpha1.APIGatewaySpec{}).GlobalRateLimits()).To(BeNil())
	g.Expect((&operatorv1alpha1.APIGatewaySpec{RateLimits: &operatorv1alpha1.RateLimitsSpec{}}).GlobalRateLimits()).To(BeNil())

	closed := withGlobal(&operatorv1alpha1.GlobalRateLimitsSpec{Redis: redis("redis"), FailOpen: ptr.To(false)})
	g.Expect(k8sClient.Create(context.Background(), closed, client.DryRunAll)).To(Succeed())
	g.Expect(closed.Spec.GlobalRateLimits().FailsOpen()).To(BeFalse())

	service := gateway("default", operatorv1alpha1.ControllerSpec{Name: operatorv1alpha1.ControllerRateLimitService, Replicas: ptr.To[int32](2)})
	g.Expect(k8sClient.Create(context.Background(), service, client.DryRunAll)).To(Succeed(), "spec.controllers[] configures the rate-limit service")
}
