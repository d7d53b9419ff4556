package translate

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

func TestPathsMeet(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"/orders", "/orders", true},
		{"/orders", "/order", false},
		{"/orders/*", "/orders/admin", true},
		{"/orders/*", "/orders", false},
		{"/orders/*", "/orders/a/b/*", true},
		{"/orders/{*}", "/orders/admin", true},
		{"/orders/{*}", "/orders/", false},
		{"/orders/{*}", "/orders/a/b", false},
		{"/orders/{*}", "/orders/admin/*", false}, // '{*}' holds no '/'
		{"/orders/{*}", "/orders/ad/min/*", false},
		{"/orders/{*}", "/orders/*", true},
		{"/orders/{*}", "/ordersx", false},
		{"/orders/{*}/items", "/orders/7/items", true},
		{"/orders/{*}/items", "/orders/7/bills", false},
		{"/orders/{*}/items", "/orders/{*}/{*}", true},
		{"/orders/{*}/items", "/{*}/admin/items", true},
		{"/orders/{*}/items", "/{*}/{*}", false},
		{"/a/{*}/c", "/a/b/{*}", true},
		{"/files/{**}", "/files/a/b/c", true},
		{"/files/{**}", "/files/", true},
		{"/files/{**}", "/files", true}, // taken as meeting, to be safe
		{"/files/{**}", "/filesystem", false},
		{"/files/{**}", "/other/{**}", false},
		{"/{**}", "/anything/at/all", true},
		{"/{*}", "/a/b", false},
		{"/{*}/{**}", "/a", true},
		{"/orders/{*}", "*", true},
		{"/orders/{*}", "*/admin", true},
		{"/orders/{*}", "*/admin/x", false},
		{"/orders/{*}", "/orders/ad*", true},
		{"/orders/{*}/x", "/orders/a/*", true},
		{"/orders/{*}", "/orders/a/", false},
		{"*admin", "/x*", true},
		{"*admin", "/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+" "+tt.b, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(pathsMeet(tt.a, tt.b)).To(Equal(tt.want))
			g.Expect(pathsMeet(tt.b, tt.a)).To(Equal(tt.want), "symmetric")
		})
	}
}

func TestTemplateRegex(t *testing.T) {
	tests := map[string]struct {
		path       string
		want       string
		match      []string
		matchNever []string
	}{
		"one segment": {
			path: "/orders/{*}/items", want: `^/orders/[^/]+/items$`,
			match: []string{"/orders/7/items"}, matchNever: []string{"/orders//items", "/orders/7/8/items", "/orders/7/items/"},
		},
		"rest": {
			path: "/files/{**}", want: `^/files/.*$`,
			match: []string{"/files/", "/files/a/b"}, matchNever: []string{"/files", "/filesx"},
		},
		"literals are quoted": {
			path: "/v1.0/{*}", want: `^/v1\.0/[^/]+$`,
			match: []string{"/v1.0/x"}, matchNever: []string{"/v1x0/x"},
		},
		"root rest": {path: "/{**}", want: `^/.*$`, match: []string{"/", "/a/b"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(templateRegex(tt.path)).To(Equal(tt.want))
			re := regexp.MustCompile(templateRegex(tt.path))
			for _, p := range tt.match {
				g.Expect(re.MatchString(p)).To(BeTrue(), p)
			}
			for _, p := range tt.matchNever {
				g.Expect(re.MatchString(p)).To(BeFalse(), p)
			}
		})
	}
}

func TestCheckTemplate(t *testing.T) {
	for path, ok := range map[string]bool{
		"/orders/{*}":       true,
		"/orders/{*}/items": true,
		"/files/{**}":       true,
		"/{*}/{**}":         true,
		"/{**}":             true,
		"/{**}/x":           false,
		"/a/{**}/{**}":      false,
		"/a/x{*}":           false,
		"/a/{*}x/b":         false,
		"/a/{*}/*":          false,
		"/a/{*}*":           false,
		"/a/{***}":          false,
		"/a/{*":             false,
	} {
		g := NewWithT(t)
		if ok {
			g.Expect(checkTemplate(path)).To(Succeed(), path)
		} else {
			g.Expect(checkTemplate(path)).NotTo(Succeed(), path)
		}
	}
}

// bruteForceRegex is a pattern's meaning as a Go regular expression over
// paths, written independently of pathAlternatives.
func bruteForceRegex(p string) *regexp.Regexp {
	switch {
	case p == "*":
		return regexp.MustCompile(`^.*$`)
	case isTemplate(p):
		expr := regexp.QuoteMeta(p)
		expr = strings.ReplaceAll(expr, `/\{\*\*\}`, `(/.*)?`)
		expr = strings.ReplaceAll(expr, `\{\*\}`, `[^/]+`)
		return regexp.MustCompile("^" + expr + "$")
	case strings.HasPrefix(p, "*"):
		return regexp.MustCompile("^.*" + regexp.QuoteMeta(p[1:]) + "$")
	case strings.HasSuffix(p, "*"):
		return regexp.MustCompile("^" + regexp.QuoteMeta(p[:len(p)-1]) + ".*$")
	}
	return regexp.MustCompile("^" + regexp.QuoteMeta(p) + "$")
}

func randomPattern(rnd *rand.Rand) string {
	parts := []string{"a", "b", "{*}"}
	var b strings.Builder
	for range rnd.IntN(4) {
		b.WriteString("/" + parts[rnd.IntN(len(parts))])
	}
	// Istio's paths: a template, or a prefix, suffix or exact path
	// without templates.
	switch rnd.IntN(5) {
	case 0:
		b.WriteString("/{**}")
	case 1:
		if !isTemplate(b.String()) {
			b.WriteString("/*")
		}
	case 2:
		if !isTemplate(b.String()) {
			return "*" + b.String()
		}
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// allPaths are every string of the alphabet up to a length.
func allPaths(alphabet string, maxLen int) []string {
	out := []string{""}
	level := []string{""}
	for range maxLen {
		var next []string
		for _, s := range level {
			for _, c := range alphabet {
				next = append(next, s+string(c))
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// TestPathsMeetAgainstBruteForce compares pathsMeet with a search over
// every path of up to 9 bytes of "a", "b" and "/", for random patterns
// whose common paths, if any, are that short.
func TestPathsMeetAgainstBruteForce(t *testing.T) {
	g := NewWithT(t)
	paths := allPaths("ab/", 9)
	rnd := rand.New(rand.NewPCG(32, 3))
	outcomes := map[bool]int{}
	for range 400 {
		a, b := randomPattern(rnd), randomPattern(rnd)
		if strings.HasPrefix(a, "*") && strings.HasPrefix(b, "*") {
			continue // both suffixes: they always meet, in a longer path
		}
		ra, rb := bruteForceRegex(a), bruteForceRegex(b)
		want := false
		for _, p := range paths {
			if ra.MatchString(p) && rb.MatchString(p) {
				want = true
				break
			}
		}
		g.Expect(pathsMeet(a, b)).To(Equal(want), "%s and %s", a, b)
		outcomes[want]++
	}
	g.Expect(outcomes[true]).To(BeNumerically(">", 50), "patterns that meet")
	g.Expect(outcomes[false]).To(BeNumerically(">", 50), "patterns that do not")
}

func TestTemplatesAreRefusedWhereTheyOpenAGuardedPath(t *testing.T) {
	idp := jwt("https://idp", nil, nil)
	tests := map[string]struct {
		rules   []porticov1alpha1.Rule
		wantErr string
	}{
		"noAuth template over a JWT path": {
			rules: []porticov1alpha1.Rule{
				{Path: "/orders/{*}", NoAuth: ptr.To(true)},
				{Path: "/orders/admin", JWT: idp},
			},
			wantErr: "rule /orders/{*} (noAuth) meets rule /orders/admin (jwt issuer https://idp) on the pods of service shop/orders",
		},
		"JWT template under a noAuth rest": {
			rules: []porticov1alpha1.Rule{
				{Path: "/{**}", NoAuth: ptr.To(true)},
				{Path: "/api/{*}/keys", JWT: idp},
			},
			wantErr: "rule /{**} (noAuth) meets rule /api/{*}/keys (jwt issuer https://idp)",
		},
		"noAuth rest over the bare path a JWT rule guards": {
			rules: []porticov1alpha1.Rule{
				{Path: "/files/{**}", NoAuth: ptr.To(true)},
				{Path: "/files", JWT: idp},
			},
			wantErr: "rule /files/{**} (noAuth) meets rule /files (jwt issuer https://idp)",
		},
		"templates that meet in the middle": {
			rules: []porticov1alpha1.Rule{
				{Path: "/a/{*}/c", NoAuth: ptr.To(true)},
				{Path: "/a/b/{*}", JWT: idp},
			},
			wantErr: "rule /a/{*}/c (noAuth) meets rule /a/b/{*}",
		},
		"another Service on the same pods": {
			rules: []porticov1alpha1.Rule{
				{Path: "/orders/{*}", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "orders-admin", Port: 8080}},
				{Path: "/orders/admin", JWT: idp},
			},
			wantErr: "meets rule /orders/admin",
		},
		"a rewrite onto a path a template guards": {
			rules: []porticov1alpha1.Rule{
				{Path: "/public", NoAuth: ptr.To(true), Rewrite: &porticov1alpha1.Rewrite{Path: "/admin/keys"}},
				{Path: "/admin/{*}", JWT: idp},
			},
			wantErr: "rewrites to /admin/keys, which meets /admin/{*}",
		},
		"a prefix over a template": {
			rules: []porticov1alpha1.Rule{
				{Path: "/orders/*", NoAuth: ptr.To(true)},
				{Path: "/orders/{*}/items", JWT: idp},
			},
			wantErr: "rule /orders/* (noAuth) covers rule /orders/{*}/items",
		},
		"a template with a '/*' the API server would refuse": {
			rules:   []porticov1alpha1.Rule{{Path: "/orders/{*}/*", NoAuth: ptr.To(true)}},
			wantErr: "a template may not end with '/*'",
		},
		"'{**}' not last": {
			rules:   []porticov1alpha1.Rule{{Path: "/{**}/x", NoAuth: ptr.To(true)}},
			wantErr: "'{**}' only the last",
		},
		"paths that cannot meet": {
			rules: []porticov1alpha1.Rule{
				{Path: "/orders/{*}", NoAuth: ptr.To(true)},
				{Path: "/orders/admin/keys", JWT: idp},
				{Path: "/ordersx", JWT: idp},
				{Path: "/orders/", JWT: idp},
			},
		},
		"disjoint methods": {
			rules: []porticov1alpha1.Rule{
				{Path: "/orders/{*}", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)},
				{Path: "/orders/admin", Methods: []porticov1alpha1.HTTPMethod{"POST"}, JWT: idp},
			},
		},
		"other pods": {
			rules: []porticov1alpha1.Rule{
				{Path: "/orders/{*}", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
				{Path: "/orders/admin", JWT: idp},
			},
		},
		"the same authentication": {
			rules: []porticov1alpha1.Rule{
				{Path: "/orders/{*}", JWT: jwt("https://idp", nil, nil)},
				{Path: "/orders/admin", JWT: idp},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			for _, parent := range []*porticov1alpha1.ParentReference{nil, {Name: "public"}} {
				r := newAPIRule(withRules(tt.rules...))
				if parent != nil {
					r.Spec.Gateway, r.Spec.ParentRef = "", parent
				}
				out, err := Translate(Input{APIRule: r, Selectors: selectors, Parent: Parent(r)})
				if tt.wantErr == "" {
					g.Expect(err).NotTo(HaveOccurred())
					continue
				}
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(out.VirtualService == nil && out.HTTPRoute == nil && out.Workloads == nil).To(BeTrue(), "nothing is written")
			}
		})
	}
}

// TestTemplateRouteOrder: a request that an exact path, a template and a
// prefix all match is served by the exact path's rule, then the
// template's, then the prefix's. In HTTPRoute mode a template may not
// meet a prefix or another template (the Gateway API leaves their order
// to the implementation); an exact path wins there as well.
func TestTemplateRouteOrder(t *testing.T) {
	g := NewWithT(t)
	rules := []porticov1alpha1.Rule{
		{Path: "/*", NoAuth: ptr.To(true)},
		{Path: "/orders/{*}", NoAuth: ptr.To(true), Service: &porticov1alpha1.ServiceReference{Name: "reports", Port: 9000}},
		{Path: "/orders/{*}/items/{**}", NoAuth: ptr.To(true)},
		{Path: "/orders/new", NoAuth: ptr.To(true)},
		{Path: "/api/*", NoAuth: ptr.To(true)},
	}
	out, err := Translate(Input{APIRule: newAPIRule(withRules(rules...)), Selectors: selectors})
	g.Expect(err).NotTo(HaveOccurred())
	var order []string
	for _, h := range out.VirtualService.Spec.Http {
		m := h.Match[0].Uri
		order = append(order, m.GetExact()+m.GetRegex()+m.GetPrefix())
	}
	g.Expect(order).To(Equal([]string{"/orders/new", `^/orders/[^/]+/items/.*$`, `^/orders/[^/]+$`, "/api/", "/"}))

	onGateway := newAPIRule(withRules(rules...))
	onGateway.Spec.Gateway, onGateway.Spec.ParentRef = "", &porticov1alpha1.ParentReference{Name: "public"}
	_, err = Translate(Input{APIRule: onGateway, Selectors: selectors, Parent: Parent(onGateway)})
	g.Expect(err).To(MatchError(ContainSubstring("rules /orders/{*} and /* can match the same request")))

	onGateway.Spec.Rules = []porticov1alpha1.Rule{rules[1], rules[3], rules[4],
		{Path: "/orders/{*}", Methods: []porticov1alpha1.HTTPMethod{"GET"}, NoAuth: ptr.To(true)}}
	onGateway.Spec.Rules[0].Methods = []porticov1alpha1.HTTPMethod{"POST"}
	out, err = Translate(Input{APIRule: onGateway, Selectors: selectors, Parent: Parent(onGateway)})
	g.Expect(err).NotTo(HaveOccurred(), "the same template with disjoint methods, beside an exact path and a disjoint prefix")
	g.Expect(out.HTTPRoute.Spec.Rules).To(HaveLen(4))
}
