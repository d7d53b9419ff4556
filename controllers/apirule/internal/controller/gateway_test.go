package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func TestDefaultGatewayFor(t *testing.T) {
	tests := map[string]struct {
		spec *operatorv1alpha1.GatewaySpec
		want string
		ok   bool
	}{
		"not configured":       {spec: nil},
		"disabled":             {spec: &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false), Domain: "example.com"}},
		"enabled by default":   {spec: &operatorv1alpha1.GatewaySpec{Domain: "example.com"}, want: "istio-system/portico-gateway", ok: true},
		"enabled explicitly":   {spec: &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(true), Domain: "example.com"}, want: "istio-system/portico-gateway", ok: true},
		"in another namespace": {spec: &operatorv1alpha1.GatewaySpec{Domain: "example.com", Namespace: "ingress"}, want: "ingress/portico-gateway", ok: true},
		"without a domain":     {spec: &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(true)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, domain, ok := (&operatorv1alpha1.APIGateway{Spec: operatorv1alpha1.APIGatewaySpec{Gateway: tc.spec}}).DefaultGateway()
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(got).To(Equal(tc.want))
			if ok {
				g.Expect(domain).To(Equal(tc.spec.Domain))
			}
		})
	}
}

func TestHostOnDomain(t *testing.T) {
	tests := []struct {
		host, domain string
		want         bool
	}{
		{"api.example.com", "example.com", true},
		{"x.example.com", "example.com", true},
		{"api.apps.example.com", "apps.example.com", true},
		{"API.Example.com", "example.com", true},
		{"example.com", "example.com", false},
		{"a.b.example.com", "example.com", false},
		{"*.example.com", "example.com", false},
		{"*.a.example.com", "example.com", false},
		{"api.example.org", "example.com", false},
		{"apiexample.com", "example.com", false},
		{"api.notexample.com", "example.com", false},
		{"api.example.com", "", false},
		{".example.com", "example.com", false},
	}
	for _, tc := range tests {
		t.Run(tc.host+" on "+tc.domain, func(t *testing.T) {
			NewWithT(t).Expect(hostOnDomain(tc.host, tc.domain)).To(Equal(tc.want))
		})
	}
}

func TestGatewayOf(t *testing.T) {
	enabled := &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com"}}
	tests := map[string]struct {
		rule                *porticov1alpha1.APIRule
		spec                *operatorv1alpha1.APIGatewaySpec
		status              operatorv1alpha1.APIGatewayStatus
		wantGateway, reason string
		wantParent          *porticov1alpha1.ParentReference
		wantMessageContains []string
	}{
		"a named gateway, whatever the APIGateway": {
			rule: rule("istio-system/public", "api.example.org"), spec: enabled, wantGateway: "istio-system/public",
		},
		"a named gateway without APIGateway": {
			rule: rule("istio-system/public", "api.example.org"), wantGateway: "istio-system/public",
		},
		"no gateway, no APIGateway": {
			rule: rule("", "api.example.com"), reason: porticov1alpha1.ReasonNoDefaultGateway,
		},
		"no gateway, no default gateway": {
			rule: rule("", "api.example.com"), spec: &operatorv1alpha1.APIGatewaySpec{}, reason: porticov1alpha1.ReasonNoDefaultGateway,
		},
		"no gateway, the default gateway disabled": {
			rule:   rule("", "api.example.com"),
			spec:   &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false), Domain: "example.com"}},
			reason: porticov1alpha1.ReasonNoDefaultGateway,
		},
		"the default gateway": {
			rule: rule("", "api.example.com", "web.example.com"), spec: enabled, wantGateway: "istio-system/portico-gateway",
		},
		"the default gateway in its namespace": {
			rule:        rule("", "api.example.com"),
			spec:        &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com", Namespace: "ingress"}},
			wantGateway: "ingress/portico-gateway",
		},
		"a host outside the domain": {
			rule: rule("", "api.example.com", "api.example.org"), spec: enabled, reason: porticov1alpha1.ReasonHostNotOnGateway,
			wantMessageContains: []string{"api.example.org", "example.com", "istio-system/portico-gateway"},
		},
		"a host two labels down": {
			rule: rule("", "a.b.example.com"), spec: enabled, reason: porticov1alpha1.ReasonHostNotOnGateway,
			wantMessageContains: []string{"a.b.example.com"},
		},
		"the domain itself": {
			rule: rule("", "example.com"), spec: enabled, reason: porticov1alpha1.ReasonHostNotOnGateway,
		},
		"a wildcard": {
			rule: rule("", "*.example.com"), spec: enabled, reason: porticov1alpha1.ReasonHostNotOnGateway,
		},
		"naming the default gateway explicitly, a host outside its domain": {
			rule: rule("istio-system/portico-gateway", "api.example.org"), spec: enabled, reason: porticov1alpha1.ReasonHostNotOnGateway,
		},
		"naming the default gateway explicitly, a name under its domain": {
			rule: rule("istio-system/portico-gateway", "api.example.com"), spec: enabled, wantGateway: "istio-system/portico-gateway",
		},
		"disabled, but kept while in use": {
			rule: rule("", "api.example.com"),
			spec: &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false), Domain: "example.com"}},
			status: operatorv1alpha1.APIGatewayStatus{Gateway: &operatorv1alpha1.GatewayStatus{
				State: operatorv1alpha1.GatewayWarning, Reason: operatorv1alpha1.ReasonGatewayInUse,
				Gateway: "istio-system/portico-gateway", Hosts: []string{"*.example.com"},
			}},
			wantGateway: "istio-system/portico-gateway",
		},
		"the default gateway as a Gateway API Gateway: HTTPRoute mode on its https listener": {
			rule:       rule("", "api.example.com"),
			spec:       &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{}}},
			wantParent: &porticov1alpha1.ParentReference{Group: porticov1alpha1.GatewayAPIGroup, Kind: "Gateway", Namespace: "istio-system", Name: "portico-gateway", SectionName: "https"},
		},
		"the Gateway API default gateway still bounds the hosts": {
			rule:   rule("", "api.example.org"),
			spec:   &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com", GatewayAPI: &operatorv1alpha1.DefaultGatewayAPI{}}},
			reason: porticov1alpha1.ReasonHostNotOnGateway,
		},
		"a disabled Gateway API default gateway kept while in use": {
			rule: rule("", "api.example.com"),
			spec: &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false), Domain: "example.com"}},
			status: operatorv1alpha1.APIGatewayStatus{Gateway: &operatorv1alpha1.GatewayStatus{
				State: operatorv1alpha1.GatewayWarning, Reason: operatorv1alpha1.ReasonGatewayInUse, GatewayAPI: true,
				Gateway: "ingress/portico-gateway", Hosts: []string{"*.example.com"},
			}},
			wantParent: &porticov1alpha1.ParentReference{Group: porticov1alpha1.GatewayAPIGroup, Kind: "Gateway", Namespace: "ingress", Name: "portico-gateway", SectionName: "https"},
		},
		"disabled and removed": {
			rule:   rule("", "api.example.com"),
			spec:   &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false), Domain: "example.com"}},
			status: operatorv1alpha1.APIGatewayStatus{Gateway: &operatorv1alpha1.GatewayStatus{State: operatorv1alpha1.GatewayDisabled}},
			reason: porticov1alpha1.ReasonNoDefaultGateway,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var gw *operatorv1alpha1.APIGateway
			if tc.spec != nil {
				gw = &operatorv1alpha1.APIGateway{Spec: *tc.spec, Status: tc.status}
			}
			gateway, parent, reason, msg := gatewayOf(tc.rule, gw)
			g.Expect(gateway).To(Equal(tc.wantGateway))
			g.Expect(parent).To(Equal(tc.wantParent))
			g.Expect(reason).To(Equal(tc.reason))
			if tc.reason == "" {
				g.Expect(msg).To(BeEmpty())
			} else {
				g.Expect(withdraws(reason)).To(BeTrue(), "a refusal without a gateway removes the Istio objects")
			}
			for _, s := range tc.wantMessageContains {
				g.Expect(msg).To(ContainSubstring(s))
			}
		})
	}
}

// defaultGatewayRule creates an APIRule that names no gateway.
func defaultGatewayRule(t *testing.T, name, service string, hosts ...porticov1alpha1.Hostname) {
	t.Helper()
	r := &porticov1alpha1.APIRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: porticov1alpha1.APIRuleSpec{
			Hosts:   hosts,
			Service: &porticov1alpha1.ServiceReference{Name: service, Port: 8080},
			Rules:   []porticov1alpha1.Rule{health},
		},
	}
	NewWithT(t).Expect(k8sClient.Create(context.Background(), r)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), r) })
}

// setDefaultGateway writes spec.gateway of the APIGateway, creating it.
func setDefaultGateway(t *testing.T, spec *operatorv1alpha1.GatewaySpec) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func() error {
		gw := &operatorv1alpha1.APIGateway{}
		err := k8sClient.Get(ctx, client.ObjectKey{Name: operatorv1alpha1.SingletonName}, gw)
		if apierrors.IsNotFound(err) {
			gw = &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName},
				Spec: operatorv1alpha1.APIGatewaySpec{Gateway: spec}}
			return k8sClient.Create(ctx, gw)
		}
		if err != nil {
			return err
		}
		gw.Spec.Gateway = spec
		return k8sClient.Update(ctx, gw)
	}, eventually).Should(Succeed())
}

// An APIRule that names no gateway uses the APIGateway's default gateway,
// with hosts directly under its domain only.
func TestAPIRulesWithoutGatewayUseTheDefaultGateway(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	outer := t
	t.Cleanup(func() {
		_ = k8sClient.Delete(ctx, &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}})
	})
	createService(t, "dflt")
	defaultGatewayRule(t, "dflt", "dflt", "dflt.example.com")

	c := expectReason(t, ns, "dflt", porticov1alpha1.ReasonNoDefaultGateway)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(gone("dflt", &networkingv1.VirtualService{})()).To(BeTrue())

	t.Run("an APIGateway without a default gateway is no help", func(t *testing.T) {
		setDefaultGateway(t, nil)
		expectReason(t, ns, "dflt", porticov1alpha1.ReasonNoDefaultGateway)
	})

	t.Run("the default gateway is used once its Gateway exists", func(t *testing.T) {
		g := NewWithT(t)
		setDefaultGateway(t, &operatorv1alpha1.GatewaySpec{Domain: "example.com"})
		c := expectReason(t, ns, "dflt", porticov1alpha1.ReasonGatewayNotFound)
		g.Expect(c.Message).To(ContainSubstring("istio-system/portico-gateway"))

		// As the gateway controller would, after the APIRule.
		gw := &networkingv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.DefaultGatewayName, Namespace: operatorv1alpha1.DefaultGatewayNamespace},
			Spec: networkingv1alpha3.Gateway{Selector: map[string]string{"istio": "ingressgateway"}, Servers: []*networkingv1alpha3.Server{{
				Port: &networkingv1alpha3.Port{Number: 443, Name: "https", Protocol: "HTTPS"}, Hosts: []string{"*.example.com"},
				Tls: &networkingv1alpha3.ServerTLSSettings{Mode: networkingv1alpha3.ServerTLSSettings_SIMPLE, CredentialName: "portico-gateway-tls"},
			}}},
		}
		g.Expect(k8sClient.Create(ctx, gw)).To(Succeed())
		outer.Cleanup(func() { _ = k8sClient.Delete(ctx, gw) }) // the next subtests use it
		expectReason(t, ns, "dflt", porticov1alpha1.ReasonApplied)
		vs := &networkingv1.VirtualService{}
		get(g, "dflt", vs)
		g.Expect(vs.Spec.Gateways).To(Equal([]string{"istio-system/portico-gateway"}))
		g.Expect(vs.Spec.Hosts).To(Equal([]string{"dflt.example.com"}))
	})

	t.Run("a host outside the domain is refused", func(t *testing.T) {
		g := NewWithT(t)
		createService(t, "dflt-out")
		defaultGatewayRule(t, "dflt-out", "dflt-out", "dflt-out.example.com", "dflt-out.example.org")
		c := expectReason(t, ns, "dflt-out", porticov1alpha1.ReasonHostNotOnGateway)
		g.Expect(c.Message).To(ContainSubstring("dflt-out.example.org"))
		g.Expect(c.Message).To(ContainSubstring("example.com"))
		g.Expect(gone("dflt-out", &networkingv1.VirtualService{})()).To(BeTrue())
		expectReason(t, ns, "dflt", porticov1alpha1.ReasonApplied)
	})

	t.Run("disabling the default gateway withdraws its APIRules", func(t *testing.T) {
		setDefaultGateway(t, &operatorv1alpha1.GatewaySpec{Enabled: ptr.To(false), Domain: "example.com"})
		expectReason(t, ns, "dflt", porticov1alpha1.ReasonNoDefaultGateway)
		NewWithT(t).Eventually(gone("dflt", &networkingv1.VirtualService{}), eventually).Should(BeTrue())
	})
}

// The default gateway's health host is reserved on every gateway: any
// Gateway may select the default gateway's pods, where Istio merges the
// routes of one host.
func TestReservedHost(t *testing.T) {
	enabled := &operatorv1alpha1.APIGatewaySpec{Gateway: &operatorv1alpha1.GatewaySpec{Domain: "example.com"}}
	for name, tc := range map[string]struct {
		rule *porticov1alpha1.APIRule
		spec *operatorv1alpha1.APIGatewaySpec
		want string
	}{
		"naming no gateway":                        {rule: rule("", "healthz.example.com"), spec: enabled, want: "healthz.example.com"},
		"naming the default gateway":               {rule: rule("istio-system/portico-gateway", "healthz.example.com"), spec: enabled, want: "healthz.example.com"},
		"naming an administrator's shared gateway": {rule: rule("istio-system/shared", "api.example.com", "healthz.example.com"), spec: enabled, want: "healthz.example.com"},
		"in capitals, on a tenant's own gateway":   {rule: rule("team-b/mine", "HEALTHZ.Example.com"), spec: enabled, want: "HEALTHZ.Example.com"},
		"other names":                              {rule: rule("istio-system/shared", "api.example.com"), spec: enabled},
		"without a default gateway":                {rule: rule("istio-system/shared", "healthz.example.com")},
		"a domain's wildcard (the health host's exact route wins in Envoy)": {rule: rule("istio-system/shared", "*.example.com"), spec: enabled},
	} {
		t.Run(name, func(t *testing.T) {
			var gw *operatorv1alpha1.APIGateway
			if tc.spec != nil {
				gw = &operatorv1alpha1.APIGateway{Spec: *tc.spec}
			}
			NewWithT(t).Expect(reservedHost(tc.rule, gw)).To(Equal(tc.want))
		})
	}
}

// rule is an APIRule on a gateway with hosts.
func rule(gateway string, hosts ...porticov1alpha1.Hostname) *porticov1alpha1.APIRule {
	return &porticov1alpha1.APIRule{Spec: porticov1alpha1.APIRuleSpec{Gateway: gateway, Hosts: hosts}}
}
