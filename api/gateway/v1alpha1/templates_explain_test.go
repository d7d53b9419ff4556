package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// kubectl explain documents path templates: their syntax, which rule
// serves a request, and the checks only the controller makes.
func TestKubectlExplainDocumentsPathTemplates(t *testing.T) {
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		out, err := env.Explain("apirules.spec.rules.path")
		g.Expect(err).NotTo(HaveOccurred())
		out = strings.Join(strings.Fields(out), " ") // explain wraps lines
		for _, want := range []string{
			`"{*}" matches exactly one non-empty segment`, `"{**}" any rest of the path and only as the last segment`,
			`may not end with "/*"`, "an exact path, then a template, then a prefix",
			"InvalidRule", "Istio adds up access rules", "cannot compare templates", "With parentRef",
		} {
			g.Expect(out).To(ContainSubstring(want))
		}
	}, 30*time.Second, time.Second).Should(Succeed())
}
