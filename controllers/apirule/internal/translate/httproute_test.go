package translate

import (
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// gatewayAPIDuration is the Gateway API's Duration pattern (GEP-2257).
var gatewayAPIDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

func TestGatewayDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Millisecond:                        "1ms",
		500 * time.Millisecond:                  "500ms",
		15 * time.Second:                        "15s",
		90*time.Second + 250*time.Millisecond:   "1m30s250ms",
		time.Hour:                               "1h",
		time.Hour - time.Millisecond:            "59m59s999ms",
		2*time.Minute + 3*time.Millisecond:      "2m3ms",
		10*time.Minute + 1*time.Second:          "10m1s",
		59*time.Minute + 59*time.Second:         "59m59s",
		30*time.Minute + 500*time.Millisecond:   "30m500ms",
		1500 * time.Millisecond:                 "1s500ms",
		45*time.Second + 999*time.Millisecond:   "45s999ms",
		3*time.Minute + 20*time.Second:          "3m20s",
		20*time.Minute + 20*time.Millisecond:    "20m20ms",
		1*time.Minute + 1*time.Second + 1000000: "1m1s1ms",
	} {
		got := gatewayDuration(d)
		if got != want || !gatewayAPIDuration.MatchString(got) {
			t.Errorf("gatewayDuration(%s) = %q, want %q matching the Gateway API's pattern", d, got, want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != d {
			t.Errorf("gatewayDuration(%s) = %q reads back as %s (%v)", d, got, back, err)
		}
	}
}

func TestPathMatches(t *testing.T) {
	g := NewWithT(t)
	exact := pathMatches(porticov1alpha1.Rule{Path: "/orders", Methods: []porticov1alpha1.HTTPMethod{"POST", "GET"}})
	g.Expect(exact).To(HaveLen(2), "one match per method")
	g.Expect(exact[0].Method).To(Equal(ptr.To(gwapiv1.HTTPMethodGet)))
	g.Expect(*exact[0].Path.Type).To(Equal(gwapiv1.PathMatchExact))
	g.Expect(*exact[0].Path.Value).To(Equal("/orders"))

	prefix := pathMatches(porticov1alpha1.Rule{Path: "/orders/*"})
	g.Expect(prefix).To(HaveLen(1), "no methods: one match for every method")
	g.Expect(prefix[0].Method).To(BeNil())
	g.Expect(*prefix[0].Path.Type).To(Equal(gwapiv1.PathMatchPathPrefix))
	g.Expect(*prefix[0].Path.Value).To(Equal("/orders"), "the Gateway API matches a prefix by path elements")

	g.Expect(*pathMatches(porticov1alpha1.Rule{Path: "/*"})[0].Path.Value).To(Equal("/"))
}

func TestHTTPRouteModeRefusesWhatAnHTTPRouteCannotSay(t *testing.T) {
	onGateway := func(opts ...apiRuleOption) *porticov1alpha1.APIRule {
		r := newAPIRule(opts...)
		r.Spec.Gateway, r.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "public"}
		return r
	}
	tooMany := make([]porticov1alpha1.Rule, porticov1alpha1.MaxHTTPRouteRules+1)
	for i := range tooMany {
		tooMany[i] = porticov1alpha1.Rule{Path: "/p" + string(rune('a'+i)), NoAuth: ptr.To(true)}
	}
	for name, tc := range map[string]struct {
		rule *porticov1alpha1.APIRule
		want string
	}{
		"more rules than an HTTPRoute holds": {onGateway(withRules(tooMany...)), "at most 16 rules"},
		"an encoded slash":                   {onGateway(withRules(porticov1alpha1.Rule{Path: "/a%2Fb", NoAuth: ptr.To(true)})), `contains "%2F"`},
		"a double slash":                     {onGateway(withRules(porticov1alpha1.Rule{Path: "/a//b/*", NoAuth: ptr.To(true)})), `contains "//"`},
		"a dot segment at the end":           {onGateway(withRules(porticov1alpha1.Rule{Path: "/a/..", NoAuth: ptr.To(true)})), "dot segment"},
		"a wildcard inside an origin": {onGateway(func(r *porticov1alpha1.APIRule) {
			r.Spec.CORS = &porticov1alpha1.CORSPolicy{AllowOrigins: []string{"https://*.example.com"}}
		}), "wildcard"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Translate(Input{APIRule: tc.rule, Selectors: selectors, Parent: Parent(tc.rule)})
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	// The same paths are fine for a VirtualService.
	ok := newAPIRule(withRules(porticov1alpha1.Rule{Path: "/a%2Fb", NoAuth: ptr.To(true)}))
	_, err := Translate(Input{APIRule: ok, Selectors: selectors})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

func TestParentDefaults(t *testing.T) {
	g := NewWithT(t)
	r := newAPIRule()
	g.Expect(Parent(r)).To(BeNil(), "Istio mode")
	r.Spec.ParentRef = &porticov1alpha1.ParentReference{Name: "edge"}
	g.Expect(*Parent(r)).To(Equal(porticov1alpha1.ParentReference{Group: "gateway.networking.k8s.io", Kind: "Gateway", Namespace: "shop", Name: "edge"}))
	g.Expect(r.Spec.ParentRef.Namespace).To(BeEmpty(), "the APIRule is not changed")
}
