package gating

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

var testEntry = catalog.Entry{
	Controller:              contract.RateLimit,
	DependsOn:               []operatorv1alpha1.ControllerName{"apirule"},
	ProgressDeadlineSeconds: 600,
}

func ready(versions ...string) CRDState {
	return CRDState{Established: true, ServedVersions: versions}
}

func allCRDs() map[string]CRDState {
	return map[string]CRDState{
		"ratelimits.gateway.portico.dev":   ready("v1alpha1"),
		"envoyfilters.networking.istio.io": ready("v1alpha3"),
	}
}

func with(crds map[string]CRDState, name string, state *CRDState) map[string]CRDState {
	if state == nil {
		delete(crds, name)
	} else {
		crds[name] = *state
	}
	return crds
}

func TestEvaluate(t *testing.T) {
	apiruleReady := map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase{"apirule": operatorv1alpha1.PhaseReady}
	tests := map[string]struct {
		enabled bool
		crds    map[string]CRDState
		phases  map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase
		want    Result
	}{
		"everything present runs": {
			enabled: true, crds: allCRDs(), phases: apiruleReady,
			want: Result{Run: true},
		},
		"disabled wins over missing CRDs": {
			enabled: false, crds: nil,
			want: Result{Phase: operatorv1alpha1.PhaseDisabled, Reason: operatorv1alpha1.ReasonDisabled,
				Message: "ratelimit is disabled in spec.controllers"},
		},
		"no CRD installed names both": {
			enabled: true, crds: nil, phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: ratelimits.gateway.portico.dev/v1alpha1, envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"ratelimits.gateway.portico.dev/v1alpha1", "envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"EnvoyFilter CRD deleted": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", nil), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"CRD not established yet": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", &CRDState{ServedVersions: []string{"v1alpha3"}}), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotEstablished,
				Message:     "waiting for required CRDs (not established or being deleted: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"CRD being deleted": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", &CRDState{Established: true, Terminating: true, ServedVersions: []string{"v1alpha3"}}), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotEstablished,
				Message:     "waiting for required CRDs (not established or being deleted: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"required version no longer served": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", &CRDState{Established: true, ServedVersions: []string{"v1"}}), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDVersionNotServed,
				Message:     "waiting for required CRDs (version not served: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"missing and unserved: reason is the most fundamental, both listed": {
			enabled: true,
			crds:    map[string]CRDState{"envoyfilters.networking.istio.io": {Established: true, ServedVersions: []string{"v1"}}},
			phases:  apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: ratelimits.gateway.portico.dev/v1alpha1; version not served: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"ratelimits.gateway.portico.dev/v1alpha1", "envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"dependency progressing": {
			enabled: true, crds: allCRDs(),
			phases: map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase{"apirule": operatorv1alpha1.PhaseProgressing},
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonDependencyNotReady,
				Message: "waiting for controllers it depends on to be Ready: apirule (Progressing)"},
		},
		"dependency not evaluated": {
			enabled: true, crds: allCRDs(), phases: nil,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonDependencyNotReady,
				Message: "waiting for controllers it depends on to be Ready: apirule (Unknown)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := Evaluate(Input{Entry: testEntry, Enabled: tc.enabled, Cluster: Cluster{CRDs: tc.crds, Phases: tc.phases}})
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// The gateway controller needs cert-manager's Certificate CRD only while the
// APIGateway's spec.gateway takes its certificate from cert-manager; the
// message then says why.
func TestSpecDependentCRDs(t *testing.T) {
	entry, ok := catalog.Builtin.Get(operatorv1alpha1.ControllerGateway)
	if !ok {
		t.Fatal("the catalog has no gateway controller")
	}
	const (
		certificates = "certificates.cert-manager.io"
		because      = "certificates.cert-manager.io/v1 is required because spec.gateway.certificate.certManager is set"
	)
	gatewayCRDs := func() map[string]CRDState {
		return map[string]CRDState{
			"apigateways.operator.portico.dev":    ready("v1alpha1"),
			"gateways.networking.istio.io":        ready("v1"),
			"virtualservices.networking.istio.io": ready("v1"),
		}
	}
	certManager := &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{
		Domain: "example.com",
		Certificate: &operatorv1alpha1.GatewayCertificate{CertManager: &operatorv1alpha1.CertManagerCertificate{
			IssuerRef: operatorv1alpha1.IssuerReference{Name: "le", Kind: "ClusterIssuer"},
		}},
	}}
	certManagerDisabled := certManager.DeepCopy()
	certManagerDisabled.Gateway.Enabled = ptr.To(false)
	selfSigned := &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{
		Domain:      "example.com",
		Certificate: &operatorv1alpha1.GatewayCertificate{SelfSigned: &operatorv1alpha1.SelfSignedCertificate{}},
	}}
	secretName := &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{
		Domain: "example.com", Certificate: &operatorv1alpha1.GatewayCertificate{SecretName: "wildcard-tls"},
	}}

	tests := map[string]struct {
		spec     *operatorv1alpha1.APIGatewaySpec
		disabled bool
		crds     map[string]CRDState
		want     Result
	}{
		"no spec (defaults) needs no cert-manager": {
			spec: nil, crds: gatewayCRDs(),
			want: Result{Run: true},
		},
		"no spec.gateway needs no cert-manager": {
			spec: &operatorv1alpha1.APIGatewaySpec{}, crds: gatewayCRDs(),
			want: Result{Run: true},
		},
		"selfSigned needs no cert-manager": {
			spec: selfSigned, crds: gatewayCRDs(),
			want: Result{Run: true},
		},
		"secretName needs no cert-manager": {
			spec: secretName, crds: gatewayCRDs(),
			want: Result{Run: true},
		},
		"certManager on a disabled gateway needs no cert-manager": {
			spec: certManagerDisabled, crds: gatewayCRDs(),
			want: Result{Run: true},
		},
		"certManager without cert-manager's CRD blocks, saying why": {
			spec: certManager, crds: gatewayCRDs(),
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: certificates.cert-manager.io/v1); " + because,
				MissingCRDs: []string{"certificates.cert-manager.io/v1"}},
		},
		"certManager with cert-manager's CRD runs": {
			spec: certManager, crds: with(gatewayCRDs(), certificates, &CRDState{Established: true, ServedVersions: []string{"v1"}}),
			want: Result{Run: true},
		},
		"certManager with cert-manager's CRD not established": {
			spec: certManager, crds: with(gatewayCRDs(), certificates, &CRDState{ServedVersions: []string{"v1"}}),
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotEstablished,
				Message:     "waiting for required CRDs (not established or being deleted: certificates.cert-manager.io/v1); " + because,
				MissingCRDs: []string{"certificates.cert-manager.io/v1"}},
		},
		"certManager with cert-manager's CRD not serving v1": {
			spec: certManager, crds: with(gatewayCRDs(), certificates, &CRDState{Established: true, ServedVersions: []string{"v1alpha2"}}),
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDVersionNotServed,
				Message:     "waiting for required CRDs (version not served: certificates.cert-manager.io/v1); " + because,
				MissingCRDs: []string{"certificates.cert-manager.io/v1"}},
		},
		"certManager and an always-required CRD missing: only cert-manager's is explained": {
			spec: certManager, crds: with(gatewayCRDs(), "gateways.networking.istio.io", nil),
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: gateways.networking.istio.io/v1, certificates.cert-manager.io/v1); " + because,
				MissingCRDs: []string{"gateways.networking.istio.io/v1", "certificates.cert-manager.io/v1"}},
		},
		"no spec and an always-required CRD missing: no explanation": {
			spec: nil, crds: with(gatewayCRDs(), "gateways.networking.istio.io", nil),
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: gateways.networking.istio.io/v1)",
				MissingCRDs: []string{"gateways.networking.istio.io/v1"}},
		},
		"disabled wins over a missing spec-dependent CRD": {
			spec: certManager, disabled: true, crds: nil,
			want: Result{Phase: operatorv1alpha1.PhaseDisabled, Reason: operatorv1alpha1.ReasonDisabled,
				Message: "gateway is disabled in spec.controllers"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := Evaluate(Input{Entry: entry, Enabled: !tc.disabled, Spec: tc.spec, Cluster: Cluster{CRDs: tc.crds}})
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func globalSpec(secret string) *operatorv1alpha1.APIGatewaySpec {
	return &operatorv1alpha1.APIGatewaySpec{RateLimits: &operatorv1alpha1.RateLimitsSpec{
		Global: &operatorv1alpha1.GlobalRateLimitsSpec{Redis: operatorv1alpha1.RedisSpec{SecretName: secret}},
	}}
}

func TestCheckGlobalRateLimits(t *testing.T) {
	service := catalog.Entry{Controller: contract.RateLimitService, NeedsGlobalRateLimits: true, ProgressDeadlineSeconds: 600}
	redis := SecretState{Keys: []string{"address", "password"}, Address: "redis.example.com:6380"}
	tests := map[string]struct {
		entry   catalog.Entry
		spec    *operatorv1alpha1.APIGatewaySpec
		secrets map[string]SecretState
		want    Result
		failed  bool
	}{
		"an entry that does not need global limits passes": {
			entry: testEntry, spec: nil,
		},
		"no spec: not configured": {
			entry: service, spec: nil, failed: true,
			want: Result{Phase: operatorv1alpha1.PhaseDisabled, Reason: operatorv1alpha1.ReasonNotConfigured,
				Message: "spec.rateLimits.global is not set"},
		},
		"rateLimits without global: not configured": {
			entry: service, spec: &operatorv1alpha1.APIGatewaySpec{RateLimits: &operatorv1alpha1.RateLimitsSpec{}}, failed: true,
			want: Result{Phase: operatorv1alpha1.PhaseDisabled, Reason: operatorv1alpha1.ReasonNotConfigured,
				Message: "spec.rateLimits.global is not set"},
		},
		"Secret missing": {
			entry: service, spec: globalSpec("redis"), secrets: map[string]SecretState{"other": redis}, failed: true,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonSecretNotFound,
				Message: "waiting for Secret portico-system/redis with key address (spec.rateLimits.global.redis.secretName): it does not exist"},
		},
		"Secret without address": {
			entry: service, spec: globalSpec("redis"), secrets: map[string]SecretState{"redis": {Keys: []string{"password"}}}, failed: true,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonSecretNotFound,
				Message: "waiting for Secret portico-system/redis with key address (spec.rateLimits.global.redis.secretName): it has no key address"},
		},
		"address without a port": {
			entry: service, spec: globalSpec("redis"), secrets: map[string]SecretState{"redis": {Keys: []string{"address"}, Address: "redis"}}, failed: true,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonSecretInvalid,
				Message: "Secret portico-system/redis: key address must be host:port, such as redis.example.com:6379: address redis: missing port in address"},
		},
		"configured with a usable Secret passes": {
			entry: service, spec: globalSpec("redis"), secrets: map[string]SecretState{"redis": redis},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, failed := CheckGlobalRateLimits(Input{Entry: tc.entry, Enabled: true, Spec: tc.spec,
				Cluster: Cluster{Namespace: "portico-system", Secrets: tc.secrets}})
			g.Expect(failed).To(Equal(tc.failed))
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestRedisPort(t *testing.T) {
	for address, want := range map[string]int32{
		"redis:6379": 6379, "10.0.0.1:7000": 7000, "[fd00::1]:6380": 6380, " redis:6379\n": 6379,
		"redis": 0, ":6379": 0, "redis:0": 0, "redis:65536": 0, "redis:port": 0,
	} {
		got, err := RedisPort(address)
		NewWithT(t).Expect(got).To(Equal(want), address)
		NewWithT(t).Expect(err == nil).To(Equal(want != 0), address)
	}
}

func TestEvaluateRunsTheGlobalCheckAfterEnabled(t *testing.T) {
	g := NewWithT(t)
	service := catalog.Entry{Controller: contract.RateLimitService, NeedsGlobalRateLimits: true, ProgressDeadlineSeconds: 600}
	g.Expect(Evaluate(Input{Entry: service, Enabled: false}).Reason).To(Equal(operatorv1alpha1.ReasonDisabled))
	g.Expect(Evaluate(Input{Entry: service, Enabled: true}).Reason).To(Equal(operatorv1alpha1.ReasonNotConfigured),
		"not configured comes before the CRDs: the service is not wanted")
	g.Expect(Evaluate(Input{Entry: service, Enabled: true, Spec: globalSpec("redis"),
		Cluster: Cluster{Namespace: "ns", Secrets: map[string]SecretState{"redis": {Keys: []string{"address"}, Address: "r:1"}}}}).Reason).
		To(Equal(operatorv1alpha1.ReasonCRDNotFound))
}
