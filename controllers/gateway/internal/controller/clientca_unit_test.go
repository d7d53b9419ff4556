package controller

import (
	"testing"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

// An Istio Gateway CRD older than tls.caCertCredentialName drops it: the
// controller must notice rather than write the same Gateway forever.
func TestCACredentialDropped(t *testing.T) {
	gw := &operatorv1alpha1.APIGateway{}
	c := ConfigFor(&operatorv1alpha1.GatewaySpec{Domain: "example.com"})
	desired := func(mode operatorv1alpha1.ClientCertificateMode) *networkingv1.Gateway {
		return DesiredGateway(gw, c, SelfSignedSecret, mode)
	}
	// dropped is the Gateway as an old CRD stores it: mode kept, CA
	// credential gone.
	dropped := func(mode operatorv1alpha1.ClientCertificateMode) *networkingv1.Gateway {
		g := desired(mode)
		g.Spec.Servers[0].Tls.CaCertCredentialName = ""
		return g
	}
	// bareName is the Gateway as Portico wrote it before the configmap://
	// form: Istio reads that name as a Secret, so it must be rewritten.
	bareName := func(mode operatorv1alpha1.ClientCertificateMode) *networkingv1.Gateway {
		g := desired(mode)
		g.Spec.Servers[0].Tls.CaCertCredentialName = operatorv1alpha1.DefaultGatewayClientCAConfigMap
		return g
	}
	const (
		required = operatorv1alpha1.ClientCertificateRequired
		optional = operatorv1alpha1.ClientCertificateOptional
	)
	cases := []struct {
		name    string
		live    *networkingv1.Gateway
		desired operatorv1alpha1.ClientCertificateMode
		want    bool
	}{
		{name: "stored as written", live: desired(required), desired: required},
		{name: "MUTUAL stored without the CA credential", live: dropped(required), desired: required, want: true},
		{name: "OPTIONAL_MUTUAL stored without it", live: dropped(optional), desired: optional, want: true},
		{name: "SIMPLE stored, MUTUAL wanted: not written yet", live: desired(""), desired: required},
		{name: "MUTUAL stored without it, OPTIONAL_MUTUAL wanted: the change of mode is written", live: dropped(required), desired: optional},
		{name: "MUTUAL stored without it, SIMPLE wanted", live: dropped(required), desired: ""},
		{name: "stored with an older Portico's bare ConfigMap name: rewritten", live: bareName(required), desired: required},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(caCredentialDropped(tc.live, desired(tc.desired))).To(Equal(tc.want))
		})
	}
	NewWithT(t).Expect(dropped(required).Spec.Servers[0].Tls.Mode).To(Equal(networkingapi.ServerTLSSettings_MUTUAL))
}

// Istio's SDS serves a ConfigMap's CAs only for configmap://NAMESPACE/NAME
// (test/istio, TestDefaultGatewayCredentialsResolve, with istiod's code);
// a bare name is a Secret.
func TestClientCACredentialName(t *testing.T) {
	g := NewWithT(t)
	for _, mode := range []operatorv1alpha1.ClientCertificateMode{operatorv1alpha1.ClientCertificateRequired, operatorv1alpha1.ClientCertificateOptional} {
		c := ConfigFor(&operatorv1alpha1.GatewaySpec{Domain: "example.com"})
		c.Namespace = "gateways"
		tls := DesiredGateway(&operatorv1alpha1.APIGateway{}, c, SelfSignedSecret, mode).Spec.Servers[0].Tls
		g.Expect(tls.CaCertCredentialName).To(Equal("configmap://gateways/portico-gateway-client-ca"), string(mode))
	}
}
