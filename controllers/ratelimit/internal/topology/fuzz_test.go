package topology

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	networkingv1alpha3client "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/internal/globallimit"
)

// FuzzCompute builds worlds from the fuzzer's bytes and checks what must
// hold for any world: Compute does not panic, is deterministic and
// independent of input order, gives every policy exactly one verdict,
// never lets two enforced policies hold the same scope of the same pods,
// writes filters only where they reach pods, renders only valid Envoy
// configuration, and keeps tenants apart: every filter holds the claims of
// one namespace and lives in that namespace or in Istio's root namespace,
// HTTP filter names are unique, a gateway-wide limit reaches only pods of
// its own namespace, and a tenant's filters in its own namespace are the
// same whatever the other namespaces' RateLimits are.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("portico: gateways, APIRules and RateLimits from bytes"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := decodeWorld(data)
		out := Compute(in)
		if err := checkInvariants(in, out); err != nil {
			t.Fatalf("%v\ninput: %+v", err, in)
		}
	})
}

// The pools keep names few, so that worlds collide: shared pods, shared
// selectors, same-age policies, targets that exist.
var (
	fuzzNamespaces = []string{"istio-system", "shop", "bookinfo", "edge"}
	fuzzSelectors  = []map[string]string{
		{"istio": "ingressgateway"},
		{"app": "gw"},
		{"istio": "ingressgateway", "app": "gw"},
		{"istio": "internal"},
		// Istio's label on the pods of the Gateway API Gateways "public" and
		// "orders".
		{gatewayv1alpha1.GatewayNameLabel: "public"},
		{gatewayv1alpha1.GatewayNameLabel: "orders"},
	}
	fuzzNames   = []string{"public", "internal", "orders", "payments"}
	fuzzPaths   = []string{"/", "/orders/*", "/health", "/a/{*}/b"}
	fuzzMethods = []gatewayv1alpha1.HTTPMethod{"GET", "POST", "DELETE"}
	fuzzHosts   = []string{"a.example", "b.example"}
	fuzzPorts   = []int32{80, 443}
	// headerChars are the characters the RateLimit CRD allows in a header name.
	headerChars = "abcXYZ019!#$%&'*+-.^_|~"
)

// fuzzBytes hands out the fuzzer's bytes; past the end it yields zeros.
type fuzzBytes struct {
	data []byte
	pos  int
}

func (b *fuzzBytes) next() byte {
	if b.pos >= len(b.data) {
		return 0
	}
	b.pos++
	return b.data[b.pos-1]
}

func (b *fuzzBytes) intn(n int) int { return int(b.next()) % n }
func (b *fuzzBytes) bit() bool      { return b.next()&1 == 1 }

// uint32n reads four bytes into [1, n].
func (b *fuzzBytes) uint32n(n uint32) uint32 {
	v := uint32(b.next()) | uint32(b.next())<<8 | uint32(b.next())<<16 | uint32(b.next())<<24
	return v%n + 1
}

// text reads a length-prefixed string of up to limit bytes, made valid
// UTF-8 as the API server stores nothing else.
func (b *fuzzBytes) text(limit int) string {
	n := b.intn(limit + 1)
	var s []byte
	for range n {
		s = append(s, b.next())
	}
	return strings.ToValidUTF8(string(s), "?")
}

func (b *fuzzBytes) pick(pool []string) string { return pool[b.intn(len(pool))] }

// bucket reads a token bucket the CRD accepts: 1 <= tokensPerFill <=
// maxTokens <= 1e9, 1s <= fillInterval <= 24h.
func (b *fuzzBytes) bucket() gatewayv1alpha1.TokenBucket {
	maxTokens := int64(b.uint32n(1_000_000_000))
	perFill := int64(b.uint32n(uint32(maxTokens)))
	interval := time.Second + time.Duration(b.uint32n(uint32(23*time.Hour/time.Millisecond)))*time.Millisecond
	if b.bit() {
		interval += time.Duration(b.uint32n(999_999)) * time.Nanosecond
	}
	return gatewayv1alpha1.TokenBucket{MaxTokens: maxTokens, TokensPerFill: perFill, FillInterval: metav1.Duration{Duration: interval}}
}

func (b *fuzzBytes) optionalBool() *bool {
	switch b.intn(3) {
	case 0:
		return nil
	case 1:
		return ptr.To(true)
	}
	return ptr.To(false)
}

func (b *fuzzBytes) descriptor() gatewayv1alpha1.Descriptor {
	var d gatewayv1alpha1.Descriptor
	kind := b.intn(3) // path, header or both: the CRD requires one
	if kind != 1 {
		d.Path = "/" + strings.TrimLeft(b.text(12), "/")
		if b.bit() {
			d.Path = b.pick(fuzzPaths)
		}
	}
	if kind != 0 {
		name := []byte{headerChars[b.intn(len(headerChars))]}
		for range b.intn(6) {
			name = append(name, headerChars[b.intn(len(headerChars))])
		}
		d.Header = &gatewayv1alpha1.HeaderMatch{Name: string(name), Value: b.text(16)}
	}
	if b.bit() {
		bucket := b.bucket()
		d.Bucket = &bucket
	}
	return d
}

// decodeWorld builds an Input the API server could hold: unique names, and
// specs that pass the CRDs' validation.
func decodeWorld(data []byte) Input {
	b := &fuzzBytes{data: data}
	in := Input{GatewaysKnown: b.next()%8 != 0, APIRulesKnown: b.next()%8 != 0, GatewayAPIGatewaysKnown: b.next()%8 != 0}
	if b.bit() {
		in.RootNamespace = DefaultRootNamespace
	}
	for range b.intn(5) {
		labels := maps.Clone(fuzzSelectors[b.intn(len(fuzzSelectors))])
		if b.bit() {
			maps.Copy(labels, fuzzSelectors[b.intn(len(fuzzSelectors))])
		}
		if b.bit() {
			labels["pod-template-hash"] = b.pick([]string{"a", "b"})
		}
		in.Pods = append(in.Pods, Pod{Namespace: b.pick(fuzzNamespaces), Labels: labels})
	}
	seen := map[string]bool{}
	unique := func(kind, ns, name string) bool {
		key := kind + "/" + ns + "/" + name
		if seen[key] {
			return false
		}
		seen[key] = true
		return true
	}
	for range b.intn(5) {
		g := Gateway{Namespace: b.pick(fuzzNamespaces), Name: b.pick(fuzzNames)}
		if b.intn(8) != 0 {
			g.Selector = maps.Clone(fuzzSelectors[b.intn(len(fuzzSelectors))])
		}
		if unique("gateway", g.Namespace, g.Name) {
			in.Gateways = append(in.Gateways, g)
		}
	}
	for range b.intn(4) {
		g := GatewayAPIGateway{Namespace: b.pick(fuzzNamespaces), Name: b.pick(fuzzNames)}
		for _, port := range fuzzPorts {
			if b.bit() {
				g.Ports = append(g.Ports, port)
			}
		}
		if unique("gatewayapi", g.Namespace, g.Name) {
			in.GatewayAPIGateways = append(in.GatewayAPIGateways, g)
		}
	}
	for range b.intn(5) {
		r := APIRule{Namespace: b.pick(fuzzNamespaces), Name: b.pick(fuzzNames), Gateway: b.pick(fuzzNamespaces) + "/" + b.pick(fuzzNames)}
		if b.bit() {
			// HTTPRoute mode; hosts may overlap, as the apirule controller
			// (not this package) decides who owns one.
			r.Gateway, r.ParentRef = "", &types.NamespacedName{Namespace: b.pick(fuzzNamespaces), Name: b.pick(fuzzNames)}
			r.Hosts = []string{b.pick(fuzzHosts)}
		}
		for range b.intn(4) {
			rule := gatewayv1alpha1.Rule{Path: b.pick(fuzzPaths), NoAuth: ptr.To(true)}
			for _, m := range fuzzMethods {
				if b.intn(4) == 0 {
					rule.Methods = append(rule.Methods, m)
				}
			}
			r.Rules = append(r.Rules, rule)
		}
		if unique("apirule", r.Namespace, r.Name) {
			in.APIRules = append(in.APIRules, r)
		}
	}
	for i := range b.intn(7) {
		p := Policy{Namespace: b.pick(fuzzNamespaces), Name: fmt.Sprintf("limit-%d", i), Created: t0.Add(time.Duration(b.intn(3)) * time.Minute)}
		p.UID = types.UID("uid-" + p.Namespace + "-" + p.Name)
		p.Spec.TargetRef = gatewayv1alpha1.TargetReference{Kind: gatewayv1alpha1.TargetGateway, Name: b.pick(fuzzNames)}
		switch b.intn(4) {
		case 0, 1:
			p.Spec.TargetRef.Kind = gatewayv1alpha1.TargetAPIRule
		case 2:
			p.Spec.TargetRef.Group = gatewayv1alpha1.GatewayAPIGroup
		}
		p.Spec.Local = ptr.To(b.bucket())
		p.Spec.Enforce = b.optionalBool()
		p.Spec.ResponseHeaders = b.optionalBool()
		for range b.intn(4) {
			p.Spec.Descriptors = append(p.Spec.Descriptors, b.descriptor())
		}
		switch b.intn(4) {
		case 1: // global only
			p.Spec.Local, p.Spec.Descriptors = nil, nil
			p.Spec.Global = everyGlobalRule()
		case 2: // local and global
			p.Spec.Global = everyGlobalRule()
		}
		in.Policies = append(in.Policies, p)
	}
	if b.intn(4) != 0 {
		in.Global = testGlobal
	}
	return in
}

// reversed is the same world listed in the opposite order, with every pod
// listed twice (replicas).
func reversed(in Input) Input {
	out := in
	out.Gateways = slices.Clone(in.Gateways)
	slices.Reverse(out.Gateways)
	out.GatewayAPIGateways = slices.Clone(in.GatewayAPIGateways)
	slices.Reverse(out.GatewayAPIGateways)
	out.APIRules = slices.Clone(in.APIRules)
	slices.Reverse(out.APIRules)
	out.Policies = slices.Clone(in.Policies)
	slices.Reverse(out.Policies)
	out.Pods = append(slices.Clone(in.Pods), in.Pods...)
	slices.Reverse(out.Pods)
	return out
}

// filterFacts is what an EnvoyFilter enforces, read back from its patches.
type filterFacts struct {
	ef          *networkingv1alpha3client.EnvoyFilter
	gatewayWide bool
	routes      []string
}

func readFilter(ef *networkingv1alpha3client.EnvoyFilter) filterFacts {
	facts := filterFacts{ef: ef}
	for _, cp := range ef.Spec.ConfigPatches {
		switch cp.GetApplyTo() {
		case networkingv1alpha3.EnvoyFilter_HTTP_FILTER:
			typed := cp.GetPatch().GetValue().AsMap()["typed_config"].(map[string]any)
			cfg := typed["value"].(map[string]any)
			if typed["type_url"] == rateLimitV3 {
				_, global := cfg["rate_limits"]
				facts.gatewayWide = facts.gatewayWide || global
				continue
			}
			_, local := cfg["token_bucket"]
			facts.gatewayWide = facts.gatewayWide || local
		case networkingv1alpha3.EnvoyFilter_HTTP_ROUTE:
			vhost := cp.GetMatch().GetRouteConfiguration().GetVhost()
			facts.routes = append(facts.routes, vhost.GetName()+"|"+vhost.GetRoute().GetName())
		}
	}
	return facts
}

// checkInvariants checks an Output against its Input; see FuzzCompute.
func checkInvariants(in Input, out Output) error {
	g := NewGomega(func(message string, _ ...int) { panic(invariantError(message)) })
	return catchInvariant(func() { checkWith(g, in, out) })
}

type invariantError string

func catchInvariant(check func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if msg, ok := r.(invariantError); ok {
				err = fmt.Errorf("invariant broken: %s", msg)
				return
			}
			panic(r)
		}
	}()
	check()
	return nil
}

func checkWith(g Gomega, in Input, out Output) {
	// Deterministic, and independent of the order of the input.
	want := canonical(g, out)
	g.Expect(canonical(g, Compute(in))).To(Equal(want), "same input, same output")
	g.Expect(canonical(g, Compute(reversed(in)))).To(Equal(want), "input order does not matter")

	policies := map[types.NamespacedName]Policy{}
	for _, p := range in.Policies {
		policies[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	filters := map[string]*networkingv1alpha3client.EnvoyFilter{}
	for _, ef := range out.EnvoyFilters {
		g.Expect(filters).NotTo(HaveKey(ef.Namespace+"/"+ef.Name), "one object per name")
		filters[ef.Namespace+"/"+ef.Name] = ef
	}
	checkVerdicts(g, policies, filters, out)
	checkFilters(g, in, policies, filters, out)
	checkScopes(g, in, filters)
	checkGatewayWide(g, in, policies, filters, out)
	checkIsolation(g, in, out)
	checkGlobal(g, in, policies, out)
}

// checkGlobal: global rules are enforced only while the administrator
// enabled them; each namespace's configuration is valid and holds exactly
// the rules of its enforced RateLimits; a filter carries only its own
// namespace's domain and token.
func checkGlobal(g Gomega, in Input, policies map[types.NamespacedName]Policy, out Output) {
	want := map[string][]string{}
	for id, v := range out.Verdicts {
		p := policies[id]
		if p.Spec.Global == nil {
			continue
		}
		if in.Global == nil {
			g.Expect(v.Enforced()).To(BeFalse(), "%s: global rules are not enforced while not enabled", id)
			continue
		}
		if v.Enforced() {
			for _, r := range p.Spec.Global.Rules {
				want[id.Namespace] = append(want[id.Namespace], globallimit.LimitID(id.Name, r.Name))
			}
		}
	}
	got := map[string][]string{}
	for _, c := range out.GlobalConfigs {
		g.Expect(c.Validate()).To(Succeed())
		for _, l := range c.Limits {
			got[c.Namespace] = append(got[c.Namespace], l.ID)
		}
	}
	for ns := range want {
		slices.Sort(want[ns])
	}
	g.Expect(got).To(Equal(want), "the service's limits are those of the enforced RateLimits")
	if in.Global == nil {
		return
	}
	for _, ef := range out.EnvoyFilters {
		raw, err := json.Marshal(&ef.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		tenant := ef.Labels[LabelNamespace]
		for _, ns := range fuzzNamespaces {
			if ns == tenant {
				continue
			}
			g.Expect(string(raw)).NotTo(ContainSubstring(globallimit.Token(in.Global.Key, ns)), "filter of %s carries %s's token", tenant, ns)
			g.Expect(string(raw)).NotTo(ContainSubstring(`"domain":"`+globallimit.Domain(ns)+`"`), "filter of %s names %s's domain", tenant, ns)
		}
	}
}

// checkVerdicts: every policy gets exactly one verdict, with a documented
// reason, and every filter enforces some policy.
func checkVerdicts(g Gomega, policies map[types.NamespacedName]Policy, filters map[string]*networkingv1alpha3client.EnvoyFilter, out Output) {
	g.Expect(out.Verdicts).To(HaveLen(len(policies)))
	referenced := map[string]bool{}
	for key, v := range out.Verdicts {
		g.Expect(policies).To(HaveKey(key))
		g.Expect(v.Reason).To(BeElementOf(gatewayv1alpha1.ReasonEnforced, gatewayv1alpha1.ReasonNotEnforced,
			gatewayv1alpha1.ReasonTargetNotFound, gatewayv1alpha1.ReasonConflicted))
		g.Expect(v.Message).NotTo(BeEmpty())
		g.Expect(utf8.ValidString(v.Message)).To(BeTrue())
		g.Expect(v.Enforced()).To(Equal(len(v.EnvoyFilters) > 0), "%s: %s", key, v.Message)
		g.Expect(len(v.EnvoyFilters)).To(BeNumerically("<=", 1), "one filter per policy")
		for _, ref := range v.EnvoyFilters {
			g.Expect(filters).To(HaveKey(ref), "an enforced policy's filter is written")
			referenced[ref] = true
		}
	}
	g.Expect(referenced).To(HaveLen(len(filters)), "every filter enforces some policy")
}

// checkFilters: every filter is valid, reaches pods, holds the claims of
// the one namespace its label names, lives in that namespace or the root
// namespace, inserts an HTTP filter of its own name, and is owned by its
// contributors exactly when it lives in their namespace.
func checkFilters(g Gomega, in Input, policies map[types.NamespacedName]Policy, filters map[string]*networkingv1alpha3client.EnvoyFilter, out Output) {
	contributors := map[string][]types.NamespacedName{}
	for key, v := range out.Verdicts {
		for _, ref := range v.EnvoyFilters {
			contributors[ref] = append(contributors[ref], key)
		}
	}
	httpFilters := map[string]string{}
	for key, ef := range filters {
		g.Expect(validateEnvoyFilter(ef, nil)).To(Succeed())
		g.Expect(ef.Labels).To(HaveKeyWithValue(LabelManagedBy, ManagedBy))
		tenant := ef.Labels[LabelNamespace]
		g.Expect(ef.Namespace).To(BeElementOf(tenant, in.RootNamespace), "%s is written into another tenant's namespace", key)
		for _, c := range contributors[key] {
			g.Expect(c.Namespace).To(Equal(tenant), "%s holds the claims of %s and %s", key, tenant, c.Namespace)
		}
		name := value(patches(g, ef)[0])["name"].(string)
		g.Expect(httpFilters).NotTo(HaveKey(name), "%s and %s insert the same HTTP filter", httpFilters[name], key)
		httpFilters[name] = key
		g.Expect(ef.Spec.GetWorkloadSelector().GetLabels()).NotTo(BeEmpty())
		g.Expect(readReach(in, podGroups(in.Pods), ef)).NotTo(BeEmpty(), "%s reaches no pod", key)

		var owners []string
		for _, ref := range ef.OwnerReferences {
			owner := types.NamespacedName{Namespace: ef.Namespace, Name: ref.Name}
			g.Expect(policies).To(HaveKey(owner), "owners live in the filter's namespace")
			g.Expect(ref.UID).To(Equal(policies[owner].UID))
			g.Expect(ref.Controller).To(Equal(ptr.To(false)))
			g.Expect(ref.BlockOwnerDeletion).To(Equal(ptr.To(false)))
			owners = append(owners, ref.Name)
		}
		if ef.Namespace != tenant {
			g.Expect(owners).To(BeEmpty(), "%s: no owner across namespaces", key)
			continue
		}
		var want []string
		for _, c := range contributors[key] {
			want = append(want, c.Name)
		}
		g.Expect(owners).To(ConsistOf(want), "%s is owned by its contributors", key)
	}
}

// checkScopes: filters never apply twice to the same pods for one tenant
// and selector, and no two enforced policies hold the same scope of the
// same pods, whichever filters they are in.
func checkScopes(g Gomega, in Input, filters map[string]*networkingv1alpha3client.EnvoyFilter) {
	pods := podGroups(in.Pods)
	gatewayWide := map[int]string{}
	routes := map[int]map[string]string{}
	bySelector := map[string]map[int]string{}
	for _, key := range slices.Sorted(maps.Keys(filters)) {
		ef := filters[key]
		facts := readFilter(ef)
		sk := ef.Labels[LabelNamespace] + "|" + selectorKey(ef.Spec.GetWorkloadSelector().GetLabels())
		if bySelector[sk] == nil {
			bySelector[sk] = map[int]string{}
		}
		for _, i := range readReach(in, pods, ef) {
			g.Expect(bySelector[sk]).NotTo(HaveKey(i), "%s and %s apply twice to the same pods", bySelector[sk][i], key)
			bySelector[sk][i] = key
			if facts.gatewayWide {
				g.Expect(gatewayWide).NotTo(HaveKey(i), "two gateway-wide limits on the same pods")
				gatewayWide[i] = key
			}
			if routes[i] == nil {
				routes[i] = map[string]string{}
			}
			for _, r := range facts.routes {
				g.Expect(routes[i]).NotTo(HaveKey(r), "route %s limited twice on the same pods", r)
				routes[i][r] = key
			}
		}
	}
	for i := range gatewayWide {
		g.Expect(routes[i]).To(BeEmpty(), "a gateway-wide limit and route limits on the same pods")
	}
}

// checkGatewayWide: an enforced gateway-wide limit reaches only pods of its
// own namespace, where its gateway selects some; in Istio's root namespace,
// whose filters reach every namespace, its gateway selects no pod elsewhere.
func checkGatewayWide(g Gomega, in Input, policies map[types.NamespacedName]Policy, filters map[string]*networkingv1alpha3client.EnvoyFilter, out Output) {
	pods := podGroups(in.Pods)
	for key, v := range out.Verdicts {
		p := policies[key]
		if !v.Enforced() || p.Spec.TargetRef.Kind != gatewayv1alpha1.TargetGateway {
			continue
		}
		for _, ref := range v.EnvoyFilters {
			for _, i := range readReach(in, pods, filters[ref]) {
				g.Expect(pods[i].namespace).To(Equal(key.Namespace), "%s throttles pods of another namespace", key)
			}
		}
		gateways := in.Gateways
		if p.Spec.TargetRef.IsGatewayAPIGateway() {
			gateways = nil
			for _, gw := range in.GatewayAPIGateways {
				gateways = append(gateways, Gateway{Namespace: gw.Namespace, Name: gw.Name, Selector: gw.Selector()})
			}
		}
		for _, gw := range gateways {
			if gw.Namespace != key.Namespace || gw.Name != p.Spec.TargetRef.Name {
				continue
			}
			own := false
			for _, pod := range pods {
				if selects(gw.Selector, pod.labels) {
					own = own || pod.namespace == key.Namespace
					if key.Namespace == in.RootNamespace {
						g.Expect(pod.namespace).To(Equal(key.Namespace), "%s limits, from the root namespace, a gateway with pods elsewhere", key)
					}
				}
			}
			g.Expect(own).To(BeTrue(), "%s is enforced on a gateway with no pod in its namespace", key)
		}
	}
}

// checkIsolation: the filters in a tenant's own namespace, and the verdicts
// of the limits they hold, are the same when no other namespace has
// RateLimits: no other tenant's objects can stop, stale or change them.
// Istio's root namespace is the cluster admin's and is left out.
func checkIsolation(g Gomega, in Input, out Output) {
	tenants := map[string]bool{}
	for _, p := range in.Policies {
		tenants[p.Namespace] = p.Namespace != in.RootNamespace
	}
	for tenant, check := range tenants {
		if !check {
			continue
		}
		alone := in
		alone.Policies = slices.DeleteFunc(slices.Clone(in.Policies), func(p Policy) bool { return p.Namespace != tenant })
		own := func(o Output) string {
			var efs []*networkingv1alpha3client.EnvoyFilter
			verdicts := map[types.NamespacedName]Verdict{}
			for _, ef := range o.EnvoyFilters {
				if ef.Namespace == tenant {
					efs = append(efs, ef)
				}
			}
			for key, v := range o.Verdicts {
				if v.Enforced() && strings.HasPrefix(v.EnvoyFilters[0], tenant+"/") {
					verdicts[key] = v
				}
			}
			return canonical(g, Output{EnvoyFilters: efs, Verdicts: verdicts})
		}
		g.Expect(own(out)).To(Equal(own(Compute(alone))), "other namespaces' RateLimits change the filters of %s", tenant)
	}
}

// readReach is the pods an EnvoyFilter reaches, as Istio decides it.
func readReach(in Input, pods []podGroup, ef *networkingv1alpha3client.EnvoyFilter) []int {
	var reach []int
	for i, p := range pods {
		if selects(ef.Spec.GetWorkloadSelector().GetLabels(), p.labels) && (p.namespace == ef.Namespace || ef.Namespace == in.RootNamespace) {
			reach = append(reach, i)
		}
	}
	return reach
}
