package translate

import (
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	securityv1beta1 "istio.io/api/security/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// The fuzzer builds APIRules from a small vocabulary, chosen so that random
// picks often meet the cases that matter: prefixes over exact paths,
// services sharing pods, issuers that are prefixes of each other.
var (
	fuzzPaths = []string{"/*", "/api/*", "/api", "/api/admin", "/api/admin/*", "/api/admin/keys", "/apix", "/health"}
	// fuzzTemplates come after the fuzzed path, so the seeds' bytes keep
	// their meaning.
	fuzzTemplates = []string{"/api/{*}", "/{*}/admin", "/api/{**}", "/{**}"}
	fuzzMethods   = []porticov1alpha1.HTTPMethod{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	fuzzServices  = []*porticov1alpha1.ServiceReference{
		nil,                                // spec.service
		{Name: "orders", Port: 8081},       // spec.service's pods, named explicitly
		{Name: "orders-admin", Port: 8080}, // the same pods under another Service
		{Name: "reports", Port: 9000},      // other pods
		{Name: "reports", Namespace: "analytics", Port: 9000}, // another namespace
		{Name: "external", Port: 80},                          // no selector
	}
	// fuzzRewrites aim at the vocabulary's guarded paths.
	fuzzRewrites = []*porticov1alpha1.Rewrite{
		nil,
		{Path: "/api/admin"},
		{Prefix: "/api/"},
		{Prefix: "/"},
		{Path: "/health"},
		{Prefix: "/api/admin/"},
	}
	// fuzzBackends are weighted splits between the vocabulary's Services.
	fuzzBackends = [][]porticov1alpha1.WeightedBackend{
		nil,
		{{Service: porticov1alpha1.ServiceReference{Name: "orders", Port: 8080}, Weight: 90}, {Service: porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}, Weight: 10}},
		{{Service: porticov1alpha1.ServiceReference{Name: "orders", Port: 8080}, Weight: 50}, {Service: porticov1alpha1.ServiceReference{Name: "orders-admin", Port: 8080}, Weight: 50}},
		{{Service: porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}, Weight: 100}, {Service: porticov1alpha1.ServiceReference{Name: "reports", Namespace: "analytics", Port: 9000}}},
		{{Service: porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}, Weight: 50}, {Service: porticov1alpha1.ServiceReference{Name: "external", Port: 80}, Weight: 50}},
		{{Service: porticov1alpha1.ServiceReference{Name: "orders", Port: 8081}, Weight: 60}, {Service: porticov1alpha1.ServiceReference{Name: "orders", Port: 8080}, Weight: 40}},
	}
	// fuzzMatches tell apart rules that share a path: they select routes,
	// never access, so they must not change what the policies admit.
	fuzzMatches = []*porticov1alpha1.RequestMatch{
		nil,
		{Headers: []porticov1alpha1.RuleHeaderMatch{{Name: "x-admin", Exact: "yes"}}},
		{Headers: []porticov1alpha1.RuleHeaderMatch{{Name: "x-admin", Prefix: "y"}, {Name: "x-beta", Regex: "1|2"}}},
		{QueryParams: []porticov1alpha1.RuleQueryParamMatch{{Name: "debug", Exact: "1"}}},
		{Headers: []porticov1alpha1.RuleHeaderMatch{{Name: "x-beta", Regex: "(1"}}},
	}
	fuzzAuth = []*porticov1alpha1.JWTAuthentication{
		nil, // noAuth
		{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"},
		{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json", Audiences: []string{"shop"}},
		{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json", Audiences: []string{"shop", "admin"}, RequiredScopes: []string{"admin"}},
		{Issuer: "https://idp.example.com/evil", JWKSURI: "https://evil.example.com/jwks.json"},
		{Issuer: "https://idp.example.com", JWKSURI: "https://other.example.com/jwks.json"},
		// The list form: several issuers, token locations, alternatives.
		{Authentications: []porticov1alpha1.JWTIssuer{
			{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"},
			{Issuer: "https://idp.example.com/evil", JWKSURI: "https://evil.example.com/jwks.json"},
		}},
		{Authentications: []porticov1alpha1.JWTIssuer{{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"}},
			Authorizations: []porticov1alpha1.JWTAuthorization{{Audiences: []string{"shop"}}, {RequiredScopes: []string{"admin"}}}},
		{Authentications: []porticov1alpha1.JWTIssuer{{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json",
			FromHeaders: []porticov1alpha1.JWTHeader{{Name: "x-jwt", Prefix: "Bearer "}}, FromParams: []string{"token"}}}},
		{Authentications: []porticov1alpha1.JWTIssuer{{Issuer: "https://idp.example.com", JWKSURI: "https://idp.example.com/jwks.json"}},
			Authorizations: []porticov1alpha1.JWTAuthorization{{Audiences: []string{"shop", "admin"}, RequiredScopes: []string{"admin"}}}},
	}
	// fuzzHeaders are request header removals and response header
	// changes, allowed and reserved ones in several spellings: none may
	// reach a route that removes or changes what the mesh reads.
	fuzzHeaders = []*fuzzHeaderChange{
		nil,
		{remove: []porticov1alpha1.RemovedRequestHeader{"x-debug"}},
		{response: &porticov1alpha1.ResponseModifier{
			Set:    map[string]porticov1alpha1.ResponseHeaderValue{"strict-transport-security": "max-age=600"},
			Add:    []porticov1alpha1.ResponseHeader{{Name: "vary", Value: "origin"}},
			Remove: []porticov1alpha1.ResponseHeaderName{"server"},
		}},
		{remove: []porticov1alpha1.RemovedRequestHeader{"authorization"}},
		{remove: []porticov1alpha1.RemovedRequestHeader{"x_forwarded_for"}},
		{response: &porticov1alpha1.ResponseModifier{Set: map[string]porticov1alpha1.ResponseHeaderValue{"Set_Cookie": "s=1"}}},
		{response: &porticov1alpha1.ResponseModifier{Add: []porticov1alpha1.ResponseHeader{{Name: "access-control-allow-origin", Value: "*"}}}},
		{remove: []porticov1alpha1.RemovedRequestHeader{"x-debug"}, response: &porticov1alpha1.ResponseModifier{Remove: []porticov1alpha1.ResponseHeaderName{"x_debug"}}},
	}
	// fuzzClients are client-address accesses; the last is not canonical.
	fuzzClients = []*porticov1alpha1.ClientAddresses{
		nil,
		{Allow: []porticov1alpha1.AddressBlock{"203.0.113.0/24"}},
		{Deny: []porticov1alpha1.AddressBlock{"198.51.100.0/24"}},
		{Allow: []porticov1alpha1.AddressBlock{"203.0.113.0/24", "2001:db8::/32"}, Deny: []porticov1alpha1.AddressBlock{"203.0.113.7"}},
		{Allow: []porticov1alpha1.AddressBlock{"10.1.2.3/8"}},
	}
	fuzzSelectors = map[types.NamespacedName]map[string]string{
		{Namespace: "shop", Name: "orders"}:       {"app": "orders"},
		{Namespace: "shop", Name: "orders-admin"}: {"app": "orders", "tier": "admin"},
		{Namespace: "shop", Name: "reports"}:      {"app": "reports"},
		{Namespace: "analytics", Name: "reports"}: {"app": "orders"},
	}
)

// fuzzHeaderChange is a rule's request header removals and response.
type fuzzHeaderChange struct {
	remove   []porticov1alpha1.RemovedRequestHeader
	response *porticov1alpha1.ResponseModifier
}

// fuzzTrustedProxies is the administrator's count the fuzzer translates
// with: client-address rules are refused without one (a table test's).
var fuzzTrustedProxies = ptr.To[int32](1)

// fuzzAuthorizerPicks are the external authorizers extAuth rules name; the
// first pick is none.
var fuzzAuthorizerPicks = []string{"", "one", "two"}

// fuzzArgs are FuzzTranslate's typed arguments: whether spec.service is
// dropped, the fuzzed path, and for each rule (one per entry of paths, 1
// to 8) its pick from each vocabulary, modulo its size; a list shorter
// than paths picks the vocabulary's first entry for the rules it lacks.
// methods are bit masks over fuzzMethods. A weighted split replaces the
// rule's service; an authorizer makes the rule extAuth, its jwt (if any)
// the restrictions.
type fuzzArgs struct {
	noService                                                                                 bool
	path                                                                                      string
	paths, methods, services, rewrites, splits, auths, authorizers, matches, headers, clients []byte
}

func pickByte(picks []byte, i int) byte {
	if i < len(picks) {
		return picks[i]
	}
	return 0
}

func pick[T any](vocabulary []T, picks []byte, i int) T {
	return vocabulary[int(pickByte(picks, i))%len(vocabulary)]
}

// pathVocabulary is fuzzPaths, the fuzzed path, then fuzzTemplates.
func (a fuzzArgs) pathVocabulary() []string {
	return append(append(slices.Clone(fuzzPaths), a.path), fuzzTemplates...)
}

// apiRule is the APIRule the arguments pick.
func (a fuzzArgs) apiRule() *porticov1alpha1.APIRule {
	r := newAPIRule()
	if a.noService {
		r.Spec.Service = nil
	}
	r.Spec.Rules = nil
	for i := range min(max(len(a.paths), 1), 8) {
		rule := porticov1alpha1.Rule{Path: pick(a.pathVocabulary(), a.paths, i)}
		for bit, m := range fuzzMethods {
			if pickByte(a.methods, i)&(1<<bit) != 0 {
				rule.Methods = append(rule.Methods, m)
			}
		}
		if s := pick(fuzzServices, a.services, i); s != nil {
			rule.Service = ptr.To(*s)
		}
		if rw := pick(fuzzRewrites, a.rewrites, i); rw != nil {
			rule.Rewrite = rw.DeepCopy()
		}
		if split := pick(fuzzBackends, a.splits, i); split != nil {
			rule.Service, rule.Backends = nil, slices.Clone(split)
		}
		jwt := pick(fuzzAuth, a.auths, i)
		switch authorizer := pick(fuzzAuthorizerPicks, a.authorizers, i); {
		case authorizer != "":
			rule.ExtAuth = &porticov1alpha1.ExtAuth{Authorizers: []string{authorizer}}
			if jwt != nil {
				rule.ExtAuth.Restrictions = jwt.DeepCopy()
			}
		case jwt != nil:
			rule.JWT = jwt.DeepCopy()
		default:
			rule.NoAuth = ptr.To(true)
		}
		if m := pick(fuzzMatches, a.matches, i); m != nil {
			rule.Match = m.DeepCopy()
		}
		if h := pick(fuzzHeaders, a.headers, i); h != nil {
			if h.remove != nil {
				rule.Request = &porticov1alpha1.RequestModifier{RemoveHeaders: slices.Clone(h.remove)}
			}
			rule.Response = h.response.DeepCopy()
		}
		if c := pick(fuzzClients, a.clients, i); c != nil {
			rule.ClientAddresses = c.DeepCopy()
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r
}

// fuzzSeed is a seed of testdata/seeds: an APIRule's spec, written with
// the vocabulary, and the fuzzed path.
type fuzzSeed struct {
	Path string                      `json:"path"`
	Spec porticov1alpha1.APIRuleSpec `json:"spec"`
}

// indexOf finds v in a vocabulary.
func indexOf[T any](vocabulary []T, v T) (byte, bool) {
	i := slices.IndexFunc(vocabulary, func(w T) bool { return reflect.DeepEqual(w, v) })
	return byte(i), i >= 0
}

// fuzzSeeds reads testdata/seeds into the fuzzer's arguments. A seed that
// says something the vocabulary cannot fails the test: the arguments must
// build the very APIRule the seed shows.
func fuzzSeeds(t testing.TB) map[string]fuzzArgs {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "seeds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no seeds in testdata/seeds: %v", err)
	}
	out := map[string]fuzzArgs{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var seed fuzzSeed
		if err := yaml.UnmarshalStrict(raw, &seed); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		a := fuzzArgs{noService: seed.Spec.Service == nil, path: seed.Path}
		ok := true
		add := func(list *[]byte) func(byte, bool) {
			return func(b byte, found bool) {
				*list = append(*list, b)
				ok = ok && found
			}
		}
		for _, rule := range seed.Spec.Rules {
			add(&a.paths)(indexOfPath(a, rule.Path))
			var mask byte
			for _, m := range rule.Methods {
				bit, found := indexOf(fuzzMethods, m)
				ok = ok && found
				mask |= 1 << bit
			}
			a.methods = append(a.methods, mask)
			if rule.Backends != nil {
				add(&a.services)(0, true)
				add(&a.splits)(indexOfSplit(rule.Backends))
			} else {
				add(&a.services)(indexOf(fuzzServices, rule.Service))
				add(&a.splits)(0, true)
			}
			add(&a.rewrites)(indexOf(fuzzRewrites, rule.Rewrite))
			jwt := rule.JWT
			if rule.ExtAuth != nil {
				add(&a.authorizers)(indexOf(fuzzAuthorizerPicks, strings.Join(rule.ExtAuth.Authorizers, ",")))
				jwt = rule.ExtAuth.Restrictions
			} else {
				add(&a.authorizers)(0, true)
			}
			add(&a.auths)(indexOf(fuzzAuth, jwt))
			add(&a.matches)(indexOf(fuzzMatches, rule.Match))
			add(&a.headers)(indexOfHeaders(rule))
			add(&a.clients)(indexOf(fuzzClients, rule.ClientAddresses))
		}
		if built := a.apiRule(); !ok || !reflect.DeepEqual(built.Spec, seed.Spec) {
			t.Fatalf("%s says what the fuzzer's vocabulary cannot (or builds another APIRule): write it with the vocabulary of fuzz_test.go", f)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = a
	}
	return out
}

func indexOfPath(a fuzzArgs, path string) (byte, bool) { return indexOf(a.pathVocabulary(), path) }

func indexOfHeaders(rule porticov1alpha1.Rule) (byte, bool) {
	if rule.Request == nil && rule.Response == nil {
		return 0, true
	}
	h := &fuzzHeaderChange{response: rule.Response}
	if rule.Request != nil {
		h.remove = rule.Request.RemoveHeaders
	}
	return indexOf(fuzzHeaders, h)
}

func indexOfSplit(backends []porticov1alpha1.WeightedBackend) (byte, bool) {
	return indexOf(fuzzBackends, backends)
}

// FuzzTranslate checks what must hold for every APIRule that translates:
// the output is deterministic, every backend gets an AuthorizationPolicy
// selecting its pods, every JWT rule is enforced on its backend by a
// RequestAuthentication and an ALLOW rule requiring its token, and no
// ALLOW rule on pods a JWT rule reaches admits its requests with less. Its
// seeds are the APIRules of testdata/seeds, each named for the case it
// holds.
func FuzzTranslate(f *testing.F) {
	for _, a := range fuzzSeeds(f) {
		f.Add(a.noService, a.path, a.paths, a.methods, a.services, a.rewrites, a.splits, a.auths, a.authorizers, a.matches, a.headers, a.clients)
	}
	f.Fuzz(func(t *testing.T, noService bool, path string, paths, methods, services, rewrites, splits, auths, authorizers, matches, headers, clients []byte) {
		if !utf8.ValidString(path) {
			// Never stored: the API server decodes JSON strings into valid
			// UTF-8 (and the CRD admits URL path characters only); the
			// oracles' regular expressions cannot even compile such a path.
			return
		}
		r := fuzzArgs{noService, path, paths, methods, services, rewrites, splits, auths, authorizers, matches, headers, clients}.apiRule()
		in := Input{APIRule: r, Selectors: fuzzSelectors, TrustedProxies: fuzzTrustedProxies}
		out, err := Translate(in)
		if err != nil {
			if out.VirtualService != nil || out.Workloads != nil {
				t.Fatalf("an error comes with no objects: %v", err)
			}
			return
		}
		first, _ := yaml.Marshal(out)
		again, _ := yaml.Marshal(must(Translate(in)))
		if string(first) != string(again) {
			t.Fatalf("translation is not deterministic:\n%s\n---\n%s", first, again)
		}
		checkEveryBackendHasAccessControl(t, r, out)
		checkEveryRuleIsEnforced(t, r, out)
		checkNoRuleAdmitsLess(t, r, out)
		checkAuthorizersDecide(t, r, out)
		checkHTTPRouteMode(t, r, out)
		checkNoRuleAdmitsOtherClients(t, r, out)
		checkHeaderChangesSpareTheMesh(t, out)
	})
}

// checkHTTPRouteMode translates the APIRule again on a Gateway API Gateway:
// the access control must be exactly Istio mode's (so every guarantee holds
// in both modes), and the HTTPRoute must route every rule, and only it, to
// its Service.
func checkHTTPRouteMode(t *testing.T, r *porticov1alpha1.APIRule, istio Output) {
	t.Helper()
	onGateway := r.DeepCopy()
	onGateway.Spec.Gateway, onGateway.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "edge"}
	out, err := Translate(Input{APIRule: onGateway, Selectors: fuzzSelectors, Parent: Parent(onGateway), TrustedProxies: fuzzTrustedProxies})
	if err != nil {
		if out.HTTPRoute != nil || out.Workloads != nil {
			t.Fatalf("an error comes with no objects: %v", err)
		}
		return
	}
	want, _ := yaml.Marshal(istio.Workloads)
	got, _ := yaml.Marshal(out.Workloads)
	if string(want) != string(got) {
		t.Fatalf("HTTPRoute mode changes the access control:\n%s\n---\n%s", want, got)
	}
	route := out.HTTPRoute
	if out.VirtualService != nil || route == nil || len(route.Spec.Rules) != len(r.Spec.Rules) {
		t.Fatalf("want one HTTPRoute rule per APIRule rule, got %+v", out)
	}
	names := map[string]bool{}
	for _, rule := range r.Spec.Rules {
		name := porticov1alpha1.HTTPRouteRuleName(r.Namespace, r.Name, rule)
		names[name] = true
		var found bool
		for _, hr := range route.Spec.Rules {
			if hr.Name == nil || string(*hr.Name) != name {
				continue
			}
			found = true
			checkBackendRefs(t, r, rule, hr.BackendRefs)
			if want := max(1, len(methodStrings(rule.Methods))); len(hr.Matches) != want {
				t.Fatalf("rule %s has %d matches, want %d", rule.Path, len(hr.Matches), want)
			}
		}
		if !found {
			t.Fatalf("no HTTPRoute rule %s for path %s", name, rule.Path)
		}
	}
	if len(names) != len(r.Spec.Rules) {
		t.Fatalf("two rules share an HTTPRoute rule name")
	}
}

// checkBackendRefs: a rule routes to its one Service with weight 1, or to
// each of its weighted backends with its weight.
func checkBackendRefs(t *testing.T, r *porticov1alpha1.APIRule, rule porticov1alpha1.Rule, refs []gwapiv1.HTTPBackendRef) {
	t.Helper()
	want := rule.Backends
	if len(want) == 0 {
		want = []porticov1alpha1.WeightedBackend{{Service: serviceOf(r, rule), Weight: 1}}
	}
	if len(refs) != len(want) {
		t.Fatalf("rule %s routes to %+v, want %+v", rule.Path, refs, want)
	}
	for i, ref := range refs {
		ns := r.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		svc := withNamespace(want[i].Service, r.Namespace)
		if string(ref.Name) != svc.Name || ns != svc.Namespace || *ref.Port != svc.Port || *ref.Weight != want[i].Weight {
			t.Fatalf("rule %s routes to %+v, want %+v", rule.Path, refs, want)
		}
	}
}

func workloadOf(out Output, backend types.NamespacedName) *Workload {
	for i := range out.Workloads {
		if out.Workloads[i].Service == backend {
			return &out.Workloads[i]
		}
	}
	return nil
}

func checkEveryBackendHasAccessControl(t *testing.T, r *porticov1alpha1.APIRule, out Output) {
	t.Helper()
	seen := map[string]bool{}
	for _, obj := range out.Objects() {
		key := obj.GetObjectKind().GroupVersionKind().Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
		if seen[key] {
			t.Fatalf("%s is generated twice", key)
		}
		seen[key] = true
		if obj.GetNamespace() != r.Namespace {
			t.Fatalf("%s is written outside the APIRule's namespace %s: consent to route grants no access rules", key, r.Namespace)
		}
	}
	for rule, b := range ruleBackends(r) {
		w := workloadOf(out, b)
		if b.Namespace != r.Namespace {
			if w != nil {
				t.Fatalf("rule %s routes to %s of another namespace, which got access control from this APIRule", rule.Path, b)
			}
			continue
		}
		if w == nil || w.AuthorizationPolicy == nil {
			t.Fatalf("rule %s routes to %s, which has no AuthorizationPolicy", rule.Path, b)
		}
		ap := w.AuthorizationPolicy
		if ap.Namespace != b.Namespace || !equalMaps(ap.Spec.Selector.GetMatchLabels(), fuzzSelectors[b]) {
			t.Fatalf("the AuthorizationPolicy of %s is %s/%s selecting %v, want namespace %s selecting %v",
				b, ap.Namespace, ap.Name, ap.Spec.Selector.GetMatchLabels(), b.Namespace, fuzzSelectors[b])
		}
		if ap.Spec.Action != securityv1beta1.AuthorizationPolicy_ALLOW {
			t.Fatalf("the AuthorizationPolicy of %s is %s", b, ap.Spec.Action)
		}
	}
}

func checkEveryRuleIsEnforced(t *testing.T, r *porticov1alpha1.APIRule, out Output) {
	t.Helper()
	for rule, b := range ruleBackends(r) {
		w := workloadOf(out, b)
		if w == nil {
			continue // another namespace's Service: its own policies decide
		}
		for _, want := range demanded(rule) {
			found := false
			for _, allow := range w.AuthorizationPolicy.Spec.Rules {
				op := allow.To[0].Operation
				if slices.Equal(op.Paths, []string{BackendPath(rule)}) && slices.Equal(op.Methods, methodStrings(rule.Methods)) &&
					demands(allow) == want {
					found = true
				}
			}
			if !found {
				t.Fatalf("rule %s %v (%s) has no ALLOW rule demanding %q on %s", rule.Path, rule.Methods, authentication(rule), want, w.Service)
			}
		}
		token := rule.TokenRequirement()
		if token == nil {
			continue
		}
		ra := w.RequestAuthentication
		if ra == nil || ra.Namespace != w.Service.Namespace || !equalMaps(ra.Spec.Selector.GetMatchLabels(), fuzzSelectors[w.Service]) {
			t.Fatalf("JWT rule %s: %s has no RequestAuthentication selecting its pods", rule.Path, w.Service)
		}
		for _, iss := range fuzzIssuers(token) {
			if !slices.ContainsFunc(ra.Spec.JwtRules, func(j *securityv1beta1.JWTRule) bool {
				return j.Issuer == iss.Issuer && j.JwksUri == iss.JWKSURI && len(j.FromHeaders) == len(iss.FromHeaders) && slices.Equal(j.FromParams, iss.FromParams)
			}) {
				t.Fatalf("JWT rule %s: the RequestAuthentication of %s does not validate issuer %s as listed", rule.Path, w.Service, iss.Issuer)
			}
		}
	}
}

// checkNoRuleAdmitsLess: Istio allows a request that any ALLOW rule on the
// pods matches, so every ALLOW rule that matches a request of a JWT rule,
// on any policy that may apply to its pods, must demand at least as much.
func checkNoRuleAdmitsLess(t *testing.T, r *porticov1alpha1.APIRule, out Output) {
	t.Helper()
	for rule, b := range ruleBackends(r) {
		token := rule.TokenRequirement()
		if token == nil {
			continue
		}
		for _, w := range out.Workloads {
			if !shareable(b, w.Service) {
				continue
			}
			for _, allow := range w.AuthorizationPolicy.Spec.Rules {
				op := allow.To[0].Operation
				// The backend sees the rewritten path.
				if !oraclePathsMeet(op.Paths[0], BackendPath(rule)) || !methodsMeet(op.Methods, methodStrings(rule.Methods)) {
					continue
				}
				if !atLeast(allow, token) {
					t.Fatalf("the ALLOW rule %v %v (%s) of %s admits requests to JWT rule %s %v of %s with less than %s",
						op.Paths, op.Methods, demands(allow), w.Service, rule.Path, rule.Methods, b, authentication(rule))
				}
			}
		}
	}
}

// ruleBackends yields every rule with every Service it routes to, written
// independently of backendsOf: the rule's weighted backends (at any
// weight), else its service or spec.service.
func ruleBackends(r *porticov1alpha1.APIRule) iter.Seq2[porticov1alpha1.Rule, types.NamespacedName] {
	return func(yield func(porticov1alpha1.Rule, types.NamespacedName) bool) {
		for _, rule := range r.Spec.Rules {
			refs := []porticov1alpha1.ServiceReference{}
			for _, b := range rule.Backends {
				refs = append(refs, b.Service)
			}
			if len(refs) == 0 && rule.Service != nil {
				refs = append(refs, *rule.Service)
			}
			if len(refs) == 0 {
				refs = append(refs, DefaultService(r))
			}
			for _, s := range refs {
				ns := s.Namespace
				if ns == "" {
					ns = r.Namespace
				}
				if !yield(rule, types.NamespacedName{Namespace: ns, Name: s.Name}) {
					return
				}
			}
		}
	}
}

// checkAuthorizersDecide: Istio asks a workload's CUSTOM policies first,
// so every extAuth rule's requests must match a CUSTOM rule of its
// authorizer on its backend, and every ALLOW rule on pods it may share
// that meets its requests must be another rule's of the same authorizer,
// itself handed to it with that very operation.
func checkAuthorizersDecide(t *testing.T, r *porticov1alpha1.APIRule, out Output) {
	t.Helper()
	for rule, b := range ruleBackends(r) {
		authorizer := rule.Authorizer()
		if authorizer == "" || b.Namespace != r.Namespace {
			continue
		}
		own := workloadOf(out, b)
		if own == nil || own.CustomPolicy == nil || own.CustomPolicy.Spec.GetProvider().GetName() != authorizer ||
			own.CustomPolicy.Spec.Action != securityv1beta1.AuthorizationPolicy_CUSTOM ||
			!equalMaps(own.CustomPolicy.Spec.Selector.GetMatchLabels(), fuzzSelectors[b]) {
			t.Fatalf("extAuth rule %s: %s has no CUSTOM policy of authorizer %s selecting its pods", rule.Path, b, authorizer)
		}
		if !customHas(own.CustomPolicy.Spec.Rules, BackendPath(rule), methodStrings(rule.Methods)) {
			t.Fatalf("extAuth rule %s %v: the CUSTOM policy of %s does not hand its requests to %s", rule.Path, rule.Methods, b, authorizer)
		}
		for _, w := range out.Workloads {
			if !shareable(b, w.Service) {
				continue
			}
			if w.CustomPolicy != nil && w.CustomPolicy.Spec.GetProvider().GetName() != authorizer {
				t.Fatalf("authorizers %s and %s on pods %s and %s may share", authorizer, w.CustomPolicy.Spec.GetProvider().GetName(), b, w.Service)
			}
			for _, allow := range w.AuthorizationPolicy.Spec.Rules {
				op := allow.To[0].Operation
				if !pathsMeet(op.Paths[0], BackendPath(rule)) || !methodsMeet(op.Methods, methodStrings(rule.Methods)) {
					continue
				}
				if w.CustomPolicy == nil || !customHas(w.CustomPolicy.Spec.Rules, op.Paths[0], op.Methods) {
					t.Fatalf("the ALLOW rule %v %v of %s meets extAuth rule %s %v of %s without authorizer %s",
						op.Paths, op.Methods, w.Service, rule.Path, rule.Methods, b, authorizer)
				}
			}
		}
	}
}

func customHas(rules []*securityv1beta1.Rule, path string, methods []string) bool {
	return slices.ContainsFunc(rules, func(c *securityv1beta1.Rule) bool {
		op := c.To[0].Operation
		return slices.Equal(op.Paths, []string{path}) && slices.Equal(op.Methods, methods)
	})
}

// shareable is written independently of MayShareWorkload: a pod with the
// union of both selectors exists unless they disagree on a label.
func shareable(a, b types.NamespacedName) bool {
	if a.Namespace != b.Namespace {
		return false
	}
	union := map[string]string{}
	for k, v := range fuzzSelectors[a] {
		union[k] = v
	}
	for k, v := range fuzzSelectors[b] {
		if w, ok := union[k]; ok && w != v {
			return false
		}
	}
	return true
}

// oraclePathsMeet reports whether some request path matches both Istio
// paths (exact, a prefix when ending with '*', or a template), written
// independently of pathsMeet: templates are tried on sample paths.
func oraclePathsMeet(p, q string) bool {
	if isTemplate(p) || isTemplate(q) {
		rp, rq := bruteForceRegex(p), bruteForceRegex(q)
		for _, path := range append(samplePaths(p), samplePaths(q)...) {
			if rp.MatchString(path) && rq.MatchString(path) {
				return true
			}
		}
		return false
	}
	pp, qp := strings.HasSuffix(p, "*"), strings.HasSuffix(q, "*")
	p, q = strings.TrimSuffix(p, "*"), strings.TrimSuffix(q, "*")
	switch {
	case pp && qp:
		return strings.HasPrefix(p, q) || strings.HasPrefix(q, p)
	case pp:
		return strings.HasPrefix(q, p)
	case qp:
		return strings.HasPrefix(p, q)
	}
	return p == q
}

// samplePaths fills a pattern's wildcards with the fuzz vocabulary's words.
func samplePaths(p string) []string {
	out := []string{p}
	for _, w := range []string{"", "admin", "api", "keys", "admin/keys", "api/admin"} {
		s := strings.ReplaceAll(p, "{**}", w)
		s = strings.ReplaceAll(s, "{*}", w)
		out = append(out, strings.TrimSuffix(s, "*")+w, strings.TrimSuffix(s, "*"))
	}
	return out
}

func methodsMeet(a, b []string) bool {
	return len(a) == 0 || len(b) == 0 || slices.ContainsFunc(a, func(m string) bool { return slices.Contains(b, m) })
}

// fuzzIssuers and fuzzAlternatives read a jwt rule's issuers and
// authorization alternatives in either form, independently of accessOf.
func fuzzIssuers(jwt *porticov1alpha1.JWTAuthentication) []porticov1alpha1.JWTIssuer {
	if jwt.Issuer != "" {
		return []porticov1alpha1.JWTIssuer{{Issuer: jwt.Issuer, JWKSURI: jwt.JWKSURI}}
	}
	return jwt.Authentications
}

func fuzzAlternatives(jwt *porticov1alpha1.JWTAuthentication) []porticov1alpha1.JWTAuthorization {
	if jwt.Issuer != "" {
		if len(jwt.Audiences)+len(jwt.RequiredScopes) == 0 {
			return nil
		}
		return []porticov1alpha1.JWTAuthorization{{Audiences: jwt.Audiences, RequiredScopes: jwt.RequiredScopes}}
	}
	return jwt.Authorizations
}

// atLeast reports whether an ALLOW rule admits only tokens of the JWT's
// issuers that satisfy one of its alternatives: one of (a subset of) its
// audiences and all its scopes.
func atLeast(allow *securityv1beta1.Rule, jwt *porticov1alpha1.JWTAuthentication) bool {
	var issuers, principals []string
	for _, iss := range fuzzIssuers(jwt) {
		issuers, principals = append(issuers, iss.Issuer), append(principals, iss.Issuer+"/*")
	}
	if len(allow.From) != 1 || len(allow.From[0].Source.RequestPrincipals) == 0 ||
		slices.ContainsFunc(allow.From[0].Source.RequestPrincipals, func(p string) bool { return !slices.Contains(principals, p) }) {
		return false
	}
	conditions := map[string][][]string{}
	for _, c := range allow.When {
		conditions[c.Key] = append(conditions[c.Key], c.Values)
	}
	subsetOf := func(set []string) func([]string) bool {
		return func(v []string) bool {
			return len(v) > 0 && !slices.ContainsFunc(v, func(a string) bool { return !slices.Contains(set, a) })
		}
	}
	if !slices.ContainsFunc(conditions["request.auth.claims[iss]"], subsetOf(issuers)) {
		return false
	}
	alternatives := fuzzAlternatives(jwt)
	if len(alternatives) == 0 {
		return true
	}
	return slices.ContainsFunc(alternatives, func(alt porticov1alpha1.JWTAuthorization) bool {
		if len(alt.Audiences) > 0 && !slices.ContainsFunc(conditions["request.auth.claims[aud]"], subsetOf(alt.Audiences)) {
			return false
		}
		for _, scope := range alt.RequiredScopes {
			if !slices.ContainsFunc(conditions["request.auth.claims[scope]"], func(v []string) bool { return slices.Equal(v, []string{scope}) }) {
				return false
			}
		}
		return true
	})
}

// demands and demanded describe an ALLOW rule's and an APIRule rule's
// requirements in one format, to pair them up.
func demands(allow *securityv1beta1.Rule) string {
	var parts []string
	for _, from := range allow.From {
		if p := from.Source.RequestPrincipals; len(p) > 0 {
			parts = append(parts, "principals="+strings.Join(p, ","))
		}
		parts = append(parts, sourceClients(from.Source)...)
	}
	for _, c := range allow.When {
		parts = append(parts, c.Key+"="+strings.Join(c.Values, ","))
	}
	return strings.Join(parts, " ")
}

// demanded lists what the ALLOW rules of a rule demand, one entry per
// alternative.
func demanded(rule porticov1alpha1.Rule) []string {
	token := rule.TokenRequirement()
	clients := demandedClients(rule)
	if token == nil {
		return []string{strings.Join(clients, " ")}
	}
	var issuers []string
	for _, iss := range fuzzIssuers(token) {
		issuers = append(issuers, iss.Issuer)
	}
	issuers = slices.Compact(slices.Sorted(slices.Values(issuers)))
	principals := slices.Clone(issuers)
	for i := range principals {
		principals[i] += "/*"
	}
	base := append(append([]string{"principals=" + strings.Join(principals, ",")}, clients...), "request.auth.claims[iss]="+strings.Join(issuers, ","))
	alternatives := fuzzAlternatives(token)
	if len(alternatives) == 0 {
		return []string{strings.Join(base, " ")}
	}
	var out []string
	for _, alt := range alternatives {
		parts := slices.Clone(base)
		if len(alt.Audiences) > 0 {
			parts = append(parts, "request.auth.claims[aud]="+strings.Join(slices.Compact(slices.Sorted(slices.Values(alt.Audiences))), ","))
		}
		for _, s := range slices.Compact(slices.Sorted(slices.Values(alt.RequiredScopes))) {
			parts = append(parts, "request.auth.claims[scope]="+s)
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
