package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// kubectl explain documents the fields from the CRDs' schemas, as a user
// reads them: the Gateway API fields and the jwt list form.
func TestKubectlExplainDocumentsFields(t *testing.T) {
	for field, want := range map[string][]string{
		"apirules.spec.parentRef":                             {"HTTPRoute mode", "ReferenceGrant", "Exclusive with gateway"},
		"apirules.spec.parentRef.sectionName":                 {"listener"},
		"ratelimits.spec.targetRef.group":                     {"gateway.networking.k8s.io"},
		"apirules.spec.rules.jwt":                             {"single-issuer form", "list form", "any of the issuers"},
		"apirules.spec.rules.jwt.authentications":             {"exclusive with issuer", "one key set and one set of token locations", "AccessConflict"},
		"apirules.spec.rules.jwt.authentications.fromHeaders": {"Authorization header", "access_token"},
		"apirules.spec.rules.jwt.authentications.fromParams":  {"access logs"},
		"apirules.spec.rules.jwt.authorizations":              {"any one entry", "all its requiredScopes and one of its audiences"},
		"apirules.spec.rules":                                 {"jwt.authentications", "reason InvalidRule"},
	} {
		// The API server publishes a new CRD's OpenAPI schema moments after
		// the CRD is established.
		NewWithT(t).Eventually(func(g Gomega) {
			out, err := env.Explain(field)
			g.Expect(err).NotTo(HaveOccurred())
			out = strings.Join(strings.Fields(out), " ") // kubectl wraps lines
			for _, w := range want {
				g.Expect(out).To(ContainSubstring(w), "kubectl explain %s", field)
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	}
}
