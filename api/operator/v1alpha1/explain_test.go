package v1alpha1_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// kubectl explain documents the default gateway's Gateway API fields and
// the network policies.
func TestKubectlExplainDocumentsTheGatewayAPIDefaultGateway(t *testing.T) {
	for field, want := range map[string][]string{
		"apigateways.spec.gateway.gatewayAPI":                                {"Gateway API Gateway", "portico-gateway-redirect"},
		"apigateways.spec.gateway.gatewayAPI.routeNamespaces":                {"https listener"},
		"apigateways.spec.gateway.gatewayAPI.gatewayClassName":               {"istio"},
		"apigateways.status.gateway.gatewayAPI":                              {"Gateway API Gateway"},
		"apigateways.spec.networkPolicies":                                   {"API server", "enforces nothing"},
		"apigateways.spec.apiRules.extAuthProviders":                         {"AuthorizerNotPermitted", "meshConfig extensionProviders"},
		"apigateways.spec.networkPolicies.enabled":                           {"Default true"},
		"apigateways.spec.networkPolicies.metricsFromNamespaces":             {"metrics port"},
		"apigateways.spec.rateLimits.global":                                 {"portico-ratelimit-service", "Redis", "enforced"},
		"apigateways.spec.rateLimits.global.redis.secretName":                {"address", "username", "password", "ca.crt", "restart"},
		"apigateways.spec.rateLimits.global.redis.tls":                       {"ca.crt", "roots"},
		"apigateways.spec.rateLimits.global.failOpen":                        {"unlimited", "500"},
		"apigateways.spec.rateLimits.global.maxKeysPerRule":                  {"overflow", "10000"},
		"apigateways.spec.rateLimits.global.timeout":                         {"10ms", "5s", "100ms"},
		"apigateways.spec.apiRules.trustedProxies":                           {"X-Forwarded-For", "numTrustedProxies", "clientAddresses"},
		"apigateways.spec.gateway.clientCertificates":                        {"mutual TLS", "portico-gateway-client-ca", "MUTUAL", "spec.tls.frontend"},
		"apigateways.spec.gateway.clientCertificates.mode":                   {"Required", "Optional", "handshake"},
		"apigateways.spec.gateway.clientCertificates.caBundle.configMapName": {"ca.crt", "controllers.gateway.configMapNames"},
		"apigateways.spec.gateway.clientCertificates.caBundle.secretName":    {"ca.crt", "controllers.gateway.secretNames"},
		"apigateways.status.gateway.clientCertificates":                      {"ClientCAInvalid"},
	} {
		NewWithT(t).Eventually(func(g Gomega) {
			out, err := env.Explain(field)
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range want {
				g.Expect(out).To(ContainSubstring(w), "kubectl explain %s", field)
			}
		}, 30*time.Second, time.Second).Should(Succeed())
	}
}
