package translate

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
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
