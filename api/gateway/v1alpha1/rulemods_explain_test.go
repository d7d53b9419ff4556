package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// kubectl explain documents the rules' request modifiers: their bounds,
// what they refuse and why.
func TestKubectlExplainDocumentsRequestModifiers(t *testing.T) {
	for field, want := range map[string][]string{
		"apirules.spec.rules.retries":               {"Istio mode only", "experimental channel"},
		"apirules.spec.rules.retries.attempts":      {"from 1 to 10"},
		"apirules.spec.rules.retries.perTryTimeout": {"may not exceed"},
		"apirules.spec.rules.retries.retryOn":       {"gateway-error", "connect-failure"},
		"apirules.spec.rules.request":               {"forges identity", "replace the client's cookie header"},
		"apirules.spec.rules.request.headers":       {"at most 8", "x-forwarded-*", "authorization", "forge identity", "with '_' and '.' as '-'", "APIRule's own namespace"},
		"apirules.spec.rules.request.cookies":       {"at most 8", "replaces", "4096", "APIRule's own namespace"},
		"apirules.spec.rules.rewrite":               {"access policy sees the rewritten path", "InvalidRule", "AccessConflict"},
		"apirules.spec.rules.rewrite.prefix":        {"/v2/orders/42", "ends with '/'"},
		"apirules.spec.rules.rewrite.path":          {"replaces the whole path"},
	} {
		NewWithT(t).Eventually(func(g Gomega) {
			out, err := env.Explain(field)
			g.Expect(err).NotTo(HaveOccurred())
			out = strings.Join(strings.Fields(out), " ") // explain wraps lines
			for _, w := range want {
				g.Expect(out).To(ContainSubstring(w), "kubectl explain %s", field)
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	}
}
