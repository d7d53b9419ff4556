package translate

import (
	"iter"
	"slices"
	"strings"
	"testing"

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
	// fuzzAuthorizers are the external authorizers extAuth rules name.
	fuzzAuthorizers = []string{"one", "two"}
	fuzzAuth        = []*porticov1alpha1.JWTAuthentication{
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
	fuzzSelectors = map[types.NamespacedName]map[string]string{
		{Namespace: "shop", Name: "orders"}:       {"app": "orders"},
		{Namespace: "shop", Name: "orders-admin"}: {"app": "orders", "tier": "admin"},
		{Namespace: "shop", Name: "reports"}:      {"app": "reports"},
		{Namespace: "analytics", Name: "reports"}: {"app": "orders"},
	}
)

// fuzzAPIRule decodes an APIRule: byte 0 drops spec.service when odd,
// byte 1 is the number of rules (1 to 8), then four bytes per rule: path
// (past the vocabulary: the fuzzed path, then a template), methods (a bit mask), service,
// authentication. The service byte divided by the number of services picks
// a rewrite, and divided by the number of services and rewrites a weighted
// split that replaces the service (none for the seeds' small bytes); the
// authentication byte divided by the number of authentications a match.
func fuzzAPIRule(data []byte, path string) *porticov1alpha1.APIRule {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	r := newAPIRule()
	if next()%2 == 1 {
		r.Spec.Service = nil
	}
	r.Spec.Rules = nil
	for n := int(next()%8) + 1; n > 0; n-- {
		rule := porticov1alpha1.Rule{}
		switch i := int(next()) % (len(fuzzPaths) + 1 + len(fuzzTemplates)); {
		case i < len(fuzzPaths):
			rule.Path = fuzzPaths[i]
		case i == len(fuzzPaths):
			rule.Path = path
		default:
			rule.Path = fuzzTemplates[i-len(fuzzPaths)-1]
		}
		mask := next()
		for i, m := range fuzzMethods {
			if mask&(1<<i) != 0 {
				rule.Methods = append(rule.Methods, m)
			}
		}
		svc := int(next())
		if s := fuzzServices[svc%len(fuzzServices)]; s != nil {
			rule.Service = ptr.To(*s)
		}
		if rw := fuzzRewrites[svc/len(fuzzServices)%len(fuzzRewrites)]; rw != nil {
			rule.Rewrite = rw.DeepCopy()
		}
		if split := fuzzBackends[svc/(len(fuzzServices)*len(fuzzRewrites))%len(fuzzBackends)]; split != nil {
			rule.Service, rule.Backends = nil, slices.Clone(split)
		}
		auth := next()
		a := fuzzAuth[int(auth&0x3f)%len(fuzzAuth)]
		switch {
		case auth&0x80 != 0:
			// The high bit hands the rule to an authorizer, "one" or
			// (with bit 6) "two"; a jwt becomes its restrictions.
			rule.ExtAuth = &porticov1alpha1.ExtAuth{Authorizers: []string{fuzzAuthorizers[auth>>6&1]}}
			if a != nil {
				rule.ExtAuth.Restrictions = a.DeepCopy()
			}
		case a != nil:
			rule.JWT = a.DeepCopy()
		default:
			rule.NoAuth = ptr.To(true)
		}
		if m := fuzzMatches[int(auth)/len(fuzzAuth)%len(fuzzMatches)]; m != nil {
			rule.Match = m.DeepCopy()
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r
}

// FuzzTranslate checks what must hold for every APIRule that translates:
// the output is deterministic, every backend gets an AuthorizationPolicy
// selecting its pods, every JWT rule is enforced on its backend by a
// RequestAuthentication and an ALLOW rule requiring its token, and no
// ALLOW rule on pods a JWT rule reaches admits its requests with less.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 0, 0, 3, 0, 1, 0}, "/api/*")             // noAuth prefix over a JWT path
	f.Add([]byte{0, 1, 6, 0, 1, 0, 3, 0, 2, 1}, "/")                  // ... whose rule names another Service of the same pods
	f.Add([]byte{0, 1, 1, 1, 0, 0, 3, 4, 4, 1}, "/")                  // ... with disjoint methods, one in another namespace
	f.Add([]byte{1, 2, 7, 0, 3, 1, 8, 0, 4, 2, 2, 0, 1, 4}, "/api/x") // no spec.service, issuers that prefix each other
	f.Add([]byte{0, 0, 8, 0, 5, 0}, "/a/*/b")                         // a Service without selector, a bad path
	f.Add([]byte{0, 1, 1, 0, 0, 6, 3, 0, 0, 3}, "/")                  // a list-form prefix with two issuers over a single-issuer path
	f.Add([]byte{0, 1, 1, 0, 0, 7, 3, 0, 0, 2}, "/")                  // alternatives over a path needing one of them
	f.Add([]byte{0, 1, 7, 0, 0, 8, 6, 0, 0, 1}, "/")                  // one issuer read from other places
	f.Add([]byte{0, 1, 1, 0, 0, 9, 3, 0, 0, 3}, "/")                  // the list form saying what the single form says
	f.Add([]byte{0, 1, 3, 0, 0, 2, 8, 0, 12, 0}, "/public/*")         // noAuth prefix rewritten over a JWT path
	f.Add([]byte{0, 1, 3, 0, 0, 3, 8, 0, 6, 0}, "/status")            // noAuth path rewritten onto a JWT path
	f.Add([]byte{0, 1, 9, 0, 0, 0, 3, 0, 0, 1}, "/")                  // noAuth template over a JWT path
	f.Add([]byte{0, 1, 10, 0, 0, 1, 12, 0, 0, 0}, "/")                // a JWT template under a noAuth "/{**}"
	f.Add([]byte{0, 1, 11, 0, 1, 0, 4, 0, 2, 1}, "/api/{**}")         // templates on other Services of the same pods
	f.Add([]byte{0, 1, 1, 0, 36, 0, 3, 0, 3, 1}, "/")                 // noAuth prefix split onto other pods, which a JWT path guards
	f.Add([]byte{0, 1, 1, 0, 72, 1, 3, 0, 2, 1}, "/")                 // a JWT prefix split between two Services of the same pods
	f.Add([]byte{0, 0, 1, 0, 108, 1}, "/")                            // a split into another namespace
	f.Add([]byte{0, 0, 1, 0, 144, 0}, "/")                            // a split onto a Service without selector
	f.Add([]byte{0, 0, 1, 0, 180, 2}, "/")                            // a split between two ports of one Service
	f.Add([]byte{0, 1, 3, 0, 0, 1, 3, 0, 0, 10}, "/")                 // a noAuth header match beside a JWT path
	f.Add([]byte{0, 1, 3, 0, 0, 1, 3, 0, 2, 20}, "/")                 // ... through another Service of the same pods, with two matches
	f.Add([]byte{0, 1, 0, 1, 0, 30, 3, 0, 0, 1}, "/")                 // a noAuth GET /* for ?debug=1 over a JWT path
	f.Add([]byte{0, 1, 1, 0, 0, 0, 3, 0, 0, 0x80}, "/")               // noAuth prefix over an extAuth path
	f.Add([]byte{0, 1, 1, 0, 0, 0x80, 3, 0, 0, 0}, "/")               // extAuth prefix over a noAuth path
	f.Add([]byte{0, 1, 1, 0, 0, 0x80, 3, 0, 2, 0xc0}, "/")            // two authorizers on pods two Services share
	f.Add([]byte{0, 1, 1, 0, 0, 0x81, 3, 0, 0, 0x81}, "/")            // one authorizer with restrictions over its own paths
	f.Add([]byte{0, 1, 1, 0, 0, 0x81, 3, 0, 0, 1}, "/")               // extAuth restrictions over the same jwt
	f.Add([]byte{0, 1, 3, 0, 0, 0x80, 8, 0, 12, 0}, "/public/*")      // noAuth prefix rewritten over an extAuth path
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		r := fuzzAPIRule(data, path)
		in := Input{APIRule: r, Selectors: fuzzSelectors}
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
	out, err := Translate(Input{APIRule: onGateway, Selectors: fuzzSelectors, Parent: Parent(onGateway)})
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
		parts = append(parts, "principals="+strings.Join(from.Source.RequestPrincipals, ","))
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
	if token == nil {
		return []string{""}
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
	base := []string{"principals=" + strings.Join(principals, ","), "request.auth.claims[iss]=" + strings.Join(issuers, ",")}
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
