package v1alpha1_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// kubectl explain documents the Gateway API fields from the CRDs' schemas,
// as a user reads them.
func TestKubectlExplainDocumentsGatewayAPIFields(t *testing.T) {
	for field, want := range map[string][]string{
		"apirules.spec.parentRef":             {"HTTPRoute mode", "ReferenceGrant", "Exclusive with gateway"},
		"apirules.spec.parentRef.sectionName": {"listener"},
		"ratelimits.spec.targetRef.group":     {"gateway.networking.k8s.io"},
	} {
		// The API server publishes a new CRD's OpenAPI schema moments after
		// the CRD is established.
		NewWithT(t).Eventually(func(g Gomega) {
			out, err := env.Explain(field)
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range want {
				g.Expect(out).To(ContainSubstring(w), "kubectl explain %s", field)
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	}
}
