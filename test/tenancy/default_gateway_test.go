package tenancy

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	networkingapi "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/test/tenancy/judge"
)

// The default gateway of these attacks: the administrator's
// APIGateway.spec.gateway with the domain tenantsDomain, in Istio's root
// namespace (the default of spec.gateway.namespace).
const (
	tenantsDomain  = "tenants.example"
	defaultGateway = rootNamespace + "/" + operatorv1alpha1.DefaultGatewayName
	healthHost     = operatorv1alpha1.DefaultGatewayHealthHost + "." + tenantsDomain
	// healthVirtualService is the gateway controller's health VirtualService.
	healthVirtualService = operatorv1alpha1.DefaultGatewayName + "-health"
)

// Class 7: the default gateway. An APIRule that names no gateway is on
// the default gateway, and may only claim names directly under its domain
// (the administrator's grant); healthz.<domain> is the gateway's own.
// Ownership is as for any host: the oldest claim wins, whatever the
// gateway. Naming the default gateway explicitly changes none of this.
func TestDefaultGateway(t *testing.T) {
	t.Run("team-b naming no gateway while there is no default gateway", func(t *testing.T) {
		claim := claimHost(t, "dg-none", "none."+tenantsDomain, "")
		wait := followUp(t.Run("is refused with NoDefaultGateway", func(t *testing.T) {
			expectRefused(t, claim, gatewayv1alpha1.ReasonNoDefaultGateway)
		}))
		t.Run("no Istio object is written for it", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, claim)).To(BeEmpty()) }, wait, poll).Should(Succeed())
		})
	})

	useDefaultGateway(t)

	// Not parallel: it runs, and its claim and grant are gone, before the
	// parallel attacks start, since a granted wildcard claim would hold
	// every name under the domain against them.
	t.Run("team-b claiming the whole domain with a wildcard granted to it", func(t *testing.T) {
		grantWildcard(t, "*."+tenantsDomain, teamB)
		claim := claimHost(t, "dg-granted", "*."+tenantsDomain, "")
		expectNotOnGateway(t, claim, "any."+tenantsDomain)
	})

	t.Run("team-b claiming the health host", func(t *testing.T) {
		t.Parallel()
		claim := claimHost(t, "dg-health", healthHost, "")
		wait := followUp(t.Run("on the default gateway is refused with HostReserved", func(t *testing.T) {
			c := expectRefused(t, claim, gatewayv1alpha1.ReasonHostReserved)
			NewWithT(t).Expect(c.Message).To(ContainSubstring("health check"))
		}))
		t.Run("no Istio object is written for it", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, claim)).To(BeEmpty()) }, wait, poll).Should(Succeed())
		})
		t.Run("the health check answers alone on the health host", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) {
				expectHealthAnswered(g)
				g.Expect(reaching(g, defaultGateway, healthHost, "/")).To(BeNil())
			}, wait, poll).Should(Succeed())
		})

		// Naming the default gateway explicitly changes nothing. The
		// refused claim goes first: a refused claim still holds its name.
		NewWithT(t).Expect(bob.Delete(context.Background(), claim)).To(Succeed())
		named := claimHost(t, "dg-health-named", healthHost, defaultGateway)
		wait = followUp(t.Run("naming the default gateway explicitly is refused too", func(t *testing.T) {
			c := expectRefused(t, named, gatewayv1alpha1.ReasonHostReserved)
			NewWithT(t).Expect(c.Message).To(ContainSubstring("health check"))
		}))
		t.Run("and the health check still answers alone, even once its VirtualService is newer", func(t *testing.T) {
			recreateHealthVirtualService(t)
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(writtenFor(g, named)).To(BeEmpty())
				expectHealthAnswered(g)
				g.Expect(reaching(g, defaultGateway, healthHost, "/")).To(BeNil())
			}, wait, poll).Should(Succeed())
		})
	})

	for i, c := range []struct{ what, host, covered string }{
		{"a host outside the domain", "shop.elsewhere.example", "shop.elsewhere.example"},
		{"a name two labels below the domain", "a.b." + tenantsDomain, "a.b." + tenantsDomain},
		{"the domain itself", tenantsDomain, tenantsDomain},
		{"the wildcard of the domain, not granted", "*." + tenantsDomain, "any." + tenantsDomain},
	} {
		t.Run("team-b claiming "+c.what+" on the default gateway", func(t *testing.T) {
			t.Parallel()
			claim := claimHost(t, "dg-out-"+string(rune('a'+i)), c.host, "")
			expectNotOnGateway(t, claim, c.covered)
		})
	}

	t.Run("team-b claiming a name team-a's older APIRule holds on the default gateway", func(t *testing.T) {
		t.Parallel()
		host := "shop." + tenantsDomain
		owner := ownHostOn(t, "dg-shop", host, "")
		var before *networkingv1.VirtualService
		t.Run("team-a's VirtualService binds to the default gateway", func(t *testing.T) {
			g := NewWithT(t)
			before = virtualServiceOf(g, owner)
			g.Expect(before.Spec.Gateways).To(Equal([]string{defaultGateway}))
			g.Expect(before.Spec.Hosts).To(Equal([]string{host}))
		})
		wait := eventually
		for i, gw := range []struct{ what, ref string }{
			{"on the default gateway", ""}, {"naming the default gateway", defaultGateway}, {"on another gateway", publicGateway},
		} {
			t.Run(gw.what, func(t *testing.T) {
				claim := claimHost(t, "dg-grab-"+string(rune('a'+i)), host, gw.ref)
				wait = min(wait, expectOccupied(t, claim, owner))
			})
		}
		t.Run("team-a keeps every path of the host", func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) {
				for _, gw := range []string{defaultGateway, publicGateway, internalGateway} {
					for _, p := range []string{"/", "/admin", "/health", "/other"} {
						r := reaching(g, gw, host, p)
						g.Expect(destinationNamespaces(r)).NotTo(ContainElement(Not(Equal(teamA))), "%s%s on %s is routed by %v", host, p, gw, r)
					}
				}
			}, wait, poll).Should(Succeed())
		})
		t.Run("team-a's VirtualService is untouched", func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(before).NotTo(BeNil())
			after := virtualServiceOf(g, owner)
			g.Expect(after.UID).To(Equal(before.UID))
			g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "team-a's VirtualService was rewritten")
		})
		t.Run("team-a's APIRule stays Applied", func(t *testing.T) { expectReason(t, owner, gatewayv1alpha1.ReasonApplied) })
	})

	for i, c := range []struct{ what, host string }{
		{"a host outside its domain", "shop.other.example"},
		{"a name two labels below its domain", "x.y." + tenantsDomain},
	} {
		t.Run("team-b naming the default gateway for "+c.what, func(t *testing.T) {
			t.Parallel()
			// Named or not, the default gateway holds APIRules to its
			// domain: Istio's *.<domain> covers names at any depth, its
			// certificate one label only.
			claim := claimHost(t, "dg-named-"+string(rune('a'+i)), c.host, defaultGateway)
			expectNotOnGateway(t, claim, c.host)
		})
	}

	t.Run("team-b pointing the default gateway elsewhere through the APIGateway", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		gw := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
		for what, patch := range map[string]func() error{
			"its spec.gateway": func() error {
				p := `{"spec":{"gateway":{"domain":"b.example","namespace":"team-b"}}}`
				return bob.Patch(ctx, gw, client.RawPatch(types.MergePatchType, []byte(p)), client.DryRunAll)
			},
			"its status.gateway, which APIRules follow while the gateway is disabled": func() error {
				p := `{"status":{"gateway":{"gateway":"team-b/portico-gateway","hosts":["*.b.example"]}}}`
				return bob.Status().Patch(ctx, gw, client.RawPatch(types.MergePatchType, []byte(p)), client.DryRunAll)
			},
		} {
			t.Run("is forbidden to write "+what, func(t *testing.T) {
				err := patch()
				NewWithT(t).Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			})
		}
	})
}

// useDefaultGateway is the administrator enabling the default gateway for
// tenantsDomain until the test ends: APIGateway.spec.gateway, and the
// Gateway and health VirtualService as the gateway controller writes them
// (the apirule controller refuses APIRules whose Gateway does not exist).
// The suite does not run the gateway controller: its own envtest
// (controllers/gateway) attacks it.
func useDefaultGateway(t *testing.T) {
	t.Helper()
	hosts := []string{"*." + tenantsDomain}
	create(t, admin, &networkingv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: operatorv1alpha1.DefaultGatewayName},
		Spec: networkingapi.Gateway{Selector: map[string]string{"istio": "ingressgateway"}, Servers: []*networkingapi.Server{
			{
				Port: &networkingapi.Port{Number: 443, Name: "https", Protocol: "HTTPS"}, Hosts: hosts,
				Tls: &networkingapi.ServerTLSSettings{Mode: networkingapi.ServerTLSSettings_SIMPLE, CredentialName: operatorv1alpha1.DefaultGatewayName + "-tls"},
			},
			{
				Port: &networkingapi.Port{Number: 80, Name: "http", Protocol: "HTTP"}, Hosts: hosts,
				Tls: &networkingapi.ServerTLSSettings{HttpsRedirect: true},
			},
		}},
	})
	create(t, admin, healthVirtualServiceObject())
	apiGateway := &operatorv1alpha1.APIGateway{ObjectMeta: metav1.ObjectMeta{Name: operatorv1alpha1.SingletonName}}
	var before *operatorv1alpha1.GatewaySpec
	update(t, admin, apiGateway, func(gw *operatorv1alpha1.APIGateway) {
		before = gw.Spec.Gateway.DeepCopy()
		gw.Spec.Gateway = &operatorv1alpha1.GatewaySpec{Domain: tenantsDomain}
	})
	t.Cleanup(func() {
		update(t, admin, apiGateway, func(gw *operatorv1alpha1.APIGateway) { gw.Spec.Gateway = before })
	})
}

// healthVirtualServiceObject is the health VirtualService as the gateway
// controller writes it: 200 at https://healthz.<domain>/healthz/ready.
func healthVirtualServiceObject() *networkingv1.VirtualService {
	return &networkingv1.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Namespace: rootNamespace, Name: healthVirtualService},
		Spec: networkingapi.VirtualService{
			Hosts:    []string{healthHost},
			Gateways: []string{defaultGateway},
			Http: []*networkingapi.HTTPRoute{{
				Name:  "health",
				Match: []*networkingapi.HTTPMatchRequest{{Uri: &networkingapi.StringMatch{MatchType: &networkingapi.StringMatch_Exact{Exact: operatorv1alpha1.DefaultGatewayHealthPath}}}},
				DirectResponse: &networkingapi.HTTPDirectResponse{
					Status: 200,
					Body:   &networkingapi.HTTPBody{Specifier: &networkingapi.HTTPBody_String_{String_: "ok\n"}},
				},
			}},
		},
	}
}

// recreateHealthVirtualService deletes the health VirtualService and
// creates it again, as the gateway controller does after a deletion, at
// least a second (creationTimestamp's resolution) after every other
// VirtualService of the health host.
func recreateHealthVirtualService(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	var vss networkingv1.VirtualServiceList
	g.Expect(admin.List(ctx, &vss)).To(Succeed())
	var newest time.Time
	for _, vs := range vss.Items {
		if vs.Name != healthVirtualService && strings.Contains(strings.Join(vs.Spec.Hosts, " "), healthHost) && vs.CreationTimestamp.After(newest) {
			newest = vs.CreationTimestamp.Time
		}
	}
	time.Sleep(time.Until(newest.Add(1100 * time.Millisecond)))
	g.Expect(admin.Delete(ctx, healthVirtualServiceObject())).To(Succeed())
	// The test's cleanup (useDefaultGateway's) deletes it by name.
	g.Eventually(func() error { return admin.Create(ctx, healthVirtualServiceObject()) }, eventually, poll).Should(Succeed())
}

// expectHealthAnswered checks that the health VirtualService answers the
// health check of the default gateway.
func expectHealthAnswered(g Gomega) {
	r := reaching(g, defaultGateway, healthHost, operatorv1alpha1.DefaultGatewayHealthPath)
	g.Expect(r).NotTo(BeNil(), "nothing answers the health check")
	g.Expect(r.VirtualService).To(Equal(rootNamespace+"/"+healthVirtualService), "the health check is routed by %v", r)
}

// expectNotOnGateway checks a claim on the default gateway of a name its
// domain does not grant: refused, nothing written, nothing routed.
func expectNotOnGateway(t *testing.T, claim *gatewayv1alpha1.APIRule, covered string) {
	t.Helper()
	wait := followUp(t.Run("is refused with HostNotOnGateway", func(t *testing.T) {
		c := expectRefused(t, claim, gatewayv1alpha1.ReasonHostNotOnGateway)
		NewWithT(t).Expect(c.Message).To(ContainSubstring(string(claim.Spec.Hosts[0])))
	}))
	t.Run("no Istio object is written for it", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) { g.Expect(writtenFor(g, claim)).To(BeEmpty()) }, wait, poll).Should(Succeed())
	})
	t.Run("no gateway routes a host it covers", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			for _, gw := range []string{defaultGateway, publicGateway, internalGateway} {
				for _, p := range []string{"/", "/admin"} {
					r := reaching(g, gw, covered, p)
					g.Expect(r).To(BeNil(), "%s%s on %s is routed by %v", covered, p, gw, r)
				}
			}
		}, wait, poll).Should(Succeed())
	})
}

// ownHostOn is team-a's APIRule serving host on gateway ("" for the default
// gateway), applied before any claim.
func ownHostOn(t *testing.T, name, host, gateway string) *gatewayv1alpha1.APIRule {
	t.Helper()
	create(t, alice, service(teamA, name))
	rule := apiRule(teamA, name, host, gateway, backend("", name), protectedAPI()...)
	create(t, alice, rule)
	expectReason(t, rule, gatewayv1alpha1.ReasonApplied)
	// Claims date from creationTimestamp (whole seconds), and a tie goes to
	// the lower UID, which nobody chooses: let a second pass, so that the
	// claims that follow are younger.
	time.Sleep(time.Until(rule.CreationTimestamp.Add(1100 * time.Millisecond)))
	return rule
}

// virtualServiceOf is the VirtualService written for an APIRule.
func virtualServiceOf(g Gomega, rule client.Object) *networkingv1.VirtualService {
	var vss networkingv1.VirtualServiceList
	g.Expect(admin.List(context.Background(), &vss, client.MatchingLabels{labelAPIRule: rule.GetName(), labelAPIRuleNamespace: rule.GetNamespace()})).To(Succeed())
	g.Expect(vss.Items).To(HaveLen(1), "VirtualServices of APIRule %s/%s", rule.GetNamespace(), rule.GetName())
	return vss.Items[0]
}

// reaching is the route a request takes through a gateway as Istio programs
// it: none unless one of the Gateway's servers accepts the host, else the
// route of the VirtualServices bound to it (judge.Route).
func reaching(g Gomega, gateway, host, path string) *judge.Routed {
	if !serves(g, gateway, host) {
		return nil
	}
	return route(g, gateway, host, path)
}

// serves reports whether the stored Istio Gateway ("namespace/name") has a
// server whose hosts cover host, with Istio's matching: "*" covers every
// name, "*.d" every name ending in ".d" at any depth. A server host's
// "namespace/" part (which namespaces' VirtualServices it admits) is
// ignored, except "~/" (none).
func serves(g Gomega, gateway, host string) bool {
	ns, name, _ := strings.Cut(gateway, "/")
	gw := &networkingv1.Gateway{}
	g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, gw)).To(Succeed())
	host = strings.ToLower(host)
	for _, s := range gw.Spec.Servers {
		for _, h := range s.Hosts {
			if admits, hostPart, ok := strings.Cut(h, "/"); ok {
				if admits == "~" {
					continue
				}
				h = hostPart
			}
			h = strings.ToLower(h)
			if h == "*" || h == host || strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:]) {
				return true
			}
		}
	}
	return false
}
