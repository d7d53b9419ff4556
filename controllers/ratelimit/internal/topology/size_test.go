package topology

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// The CRD bounds the size tests build to; TestBoundsAreTheCRDs checks them.
const (
	maxDescriptors     = 16
	maxDescriptorChars = 512 // paths, header names and values together
	maxAPIRuleRules    = 64
)

// atTheBounds is an APIRule at its bounds (64 rules, the longest namespace
// and name, so the longest route names) and a RateLimit on it at every bound
// of the RateLimit CRD, with the largest rendering: 16 descriptors holding
// 512 characters that JSON writes as six bytes each ("\u003c"), every
// bucket with the longest numbers and fill interval, shadow mode and
// response headers.
func atTheBounds(ns, name string, age int) (APIRule, Policy) {
	rule := APIRule{Namespace: ns, Name: name, Gateway: "istio-system/public"}
	methods := []gatewayv1alpha1.HTTPMethod{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	for i := range maxAPIRuleRules {
		rule.Rules = append(rule.Rules, gatewayv1alpha1.Rule{Path: fmt.Sprintf("/%0255d", i), Methods: methods, NoAuth: ptr.To(true)})
	}
	widest := gatewayv1alpha1.TokenBucket{MaxTokens: 1_000_000_000, TokensPerFill: 1_000_000_000, FillInterval: metav1.Duration{Duration: 24*time.Hour - time.Nanosecond}}
	per := maxDescriptorChars / maxDescriptors // 32: a path of 16, a header of 1 + 15
	p := policy(ns, "limit-"+name[:10], age, gatewayv1alpha1.TargetAPIRule, name, func(p *Policy) {
		p.Spec.Local = &widest
		p.Spec.Enforce = ptr.To(false)
		p.Spec.ResponseHeaders = ptr.To(true)
		for range maxDescriptors {
			p.Spec.Descriptors = append(p.Spec.Descriptors, gatewayv1alpha1.Descriptor{
				Path:   "/" + strings.Repeat("<", per/2-1),
				Header: &gatewayv1alpha1.HeaderMatch{Name: "&", Value: strings.Repeat(">", per/2-1)},
				Bucket: &widest,
			})
		}
	})
	return rule, p
}

// longName is a valid object name of n characters ending in suffix.
func longName(n int, suffix string) string { return strings.Repeat("n", n-len(suffix)) + suffix }

// TestOneRateLimitAtTheBoundsFitsTheBudget: the admission bounds keep any
// single RateLimit on any APIRule below the EnvoyFilter size budget, so a
// tenant can always use one.
func TestOneRateLimitAtTheBoundsFitsTheBudget(t *testing.T) {
	g := NewWithT(t)
	ns := longName(63, "a")
	rule, p := atTheBounds(ns, longName(253, "r1"), 0)
	in := world(p)
	in.APIRules = []APIRule{rule}
	out := Compute(in)
	g.Expect(out.Verdicts[id(ns, p.Name)].Enforced()).To(BeTrue(), out.Verdicts[id(ns, p.Name)].Message)
	g.Expect(out.EnvoyFilters).To(HaveLen(1))
	ef := out.EnvoyFilters[0]
	g.Expect(ef.Spec.ConfigPatches).To(HaveLen(1 + maxAPIRuleRules))
	g.Expect(validateEnvoyFilter(ef, nil)).To(Succeed())

	size, err := Size(ef)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("worst-case EnvoyFilter of one RateLimit: %d bytes (%d KiB) of a budget of %d KiB", size, size>>10, MaxEnvoyFilterBytes>>10)
	g.Expect(size).To(BeNumerically("<", MaxEnvoyFilterBytes))
	g.Expect(size).To(BeNumerically(">", MaxEnvoyFilterBytes/2), "the case really is near the bounds")
	g.Expect(CheckSize(ef)).To(Succeed())
}

// TestATenantOverTheBudgetFailsAlone: a namespace that piles RateLimits onto
// a shared workload gets a filter over the budget; the filter holds only its
// own RateLimits, so another namespace's filter on the same pods is
// unaffected.
func TestATenantOverTheBudgetFailsAlone(t *testing.T) {
	g := NewWithT(t)
	teamA := APIRule{Namespace: "team-a", Name: "api", Gateway: "istio-system/public", Rules: []gatewayv1alpha1.Rule{{Path: "/a/*", NoAuth: ptr.To(true)}}}
	in := world(policy("team-a", "limit", 3, gatewayv1alpha1.TargetAPIRule, "api"))
	in.APIRules = []APIRule{teamA}
	for i := range 2 {
		rule, p := atTheBounds("team-b", longName(253, fmt.Sprint(i)), i)
		p.Name = fmt.Sprintf("huge-%d", i)
		in.APIRules = append(in.APIRules, rule)
		in.Policies = append(in.Policies, p)
	}
	out := Compute(in)
	g.Expect(out.EnvoyFilters).To(HaveLen(2))
	var aFilter, bFilter string
	for _, ef := range out.EnvoyFilters {
		key := ef.Namespace + "/" + ef.Name
		switch ef.Labels[LabelNamespace] {
		case "team-a":
			aFilter = key
			g.Expect(CheckSize(ef)).To(Succeed())
		case "team-b":
			bFilter = key
			err := CheckSize(ef)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(And(
				ContainSubstring("EnvoyFilter "+key+" would be"),
				ContainSubstring("over the budget of 768 KiB for the rate limits of namespace team-b"),
				ContainSubstring("it is not written"),
			))
		}
	}
	g.Expect(out.Verdicts[id("team-a", "limit")].EnvoyFilters).To(Equal([]string{aFilter}))
	for _, name := range []string{"huge-0", "huge-1"} {
		g.Expect(out.Verdicts[id("team-b", name)].EnvoyFilters).To(Equal([]string{bFilter}), "B's RateLimits only reach B's filter")
	}
}

// TestBoundsAreTheCRDs ties the bounds the size tests build to to the
// generated CRDs: raising a bound in the API must come with a new look at
// the budget.
func TestBoundsAreTheCRDs(t *testing.T) {
	g := NewWithT(t)
	read := func(name string) apiextensionsv1.JSONSchemaProps {
		raw, err := os.ReadFile("../../../../config/crd/bases/" + name)
		g.Expect(err).NotTo(HaveOccurred())
		var crd apiextensionsv1.CustomResourceDefinition
		g.Expect(yaml.Unmarshal(raw, &crd)).To(Succeed())
		return *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	spec := read("gateway.portico.dev_ratelimits.yaml").Properties["spec"]
	descriptors := spec.Properties["descriptors"]
	g.Expect(descriptors.MaxItems).To(HaveValue(BeEquivalentTo(maxDescriptors)))
	g.Expect(descriptors.XValidations).To(ContainElement(HaveField("Rule", HaveSuffix(fmt.Sprintf("<= %d", maxDescriptorChars)))))
	item := descriptors.Items.Schema
	g.Expect(item.Properties["path"].MaxLength).To(HaveValue(BeEquivalentTo(256)))
	g.Expect(item.Properties["header"].Properties["name"].MaxLength).To(HaveValue(BeEquivalentTo(128)))
	g.Expect(item.Properties["header"].Properties["value"].MaxLength).To(HaveValue(BeEquivalentTo(256)))

	rules := read("gateway.portico.dev_apirules.yaml").Properties["spec"].Properties["rules"]
	g.Expect(rules.MaxItems).To(HaveValue(BeEquivalentTo(maxAPIRuleRules)))
}
