package translate

import (
	"slices"
	"strings"
	"testing"

	securityv1beta1 "istio.io/api/security/v1beta1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// fuzzGatewayNamespace is the namespace of newAPIRule's gateway.
const fuzzGatewayNamespace = "istio-system"

// sourceClients and demandedClients describe a source's and a rule's
// client-address requirements in one format.
func sourceClients(s *securityv1beta1.Source) []string {
	var parts []string
	if len(s.Namespaces) > 0 {
		parts = append(parts, "namespaces="+strings.Join(s.Namespaces, ","))
	}
	if len(s.RemoteIpBlocks) > 0 {
		parts = append(parts, "remote="+strings.Join(s.RemoteIpBlocks, ","))
	}
	if len(s.NotRemoteIpBlocks) > 0 {
		parts = append(parts, "notremote="+strings.Join(s.NotRemoteIpBlocks, ","))
	}
	return parts
}

func demandedClients(rule porticov1alpha1.Rule) []string {
	c := rule.ClientAddresses
	if c == nil {
		return nil
	}
	blocks := func(in []porticov1alpha1.AddressBlock) string {
		var out []string
		for _, b := range in {
			out = append(out, string(b))
		}
		return strings.Join(slices.Compact(slices.Sorted(slices.Values(out))), ",")
	}
	parts := []string{"namespaces=" + fuzzGatewayNamespace}
	if len(c.Allow) > 0 {
		parts = append(parts, "remote="+blocks(c.Allow))
	}
	if len(c.Deny) > 0 {
		parts = append(parts, "notremote="+blocks(c.Deny))
	}
	return parts
}

// checkNoRuleAdmitsOtherClients: Istio allows a request that any ALLOW
// rule on the pods matches, so every ALLOW rule that matches a request of
// a client-address rule, on any policy that may apply to its pods, must
// demand the same client addresses through the gateway's namespace.
func checkNoRuleAdmitsOtherClients(t *testing.T, r *porticov1alpha1.APIRule, out Output) {
	t.Helper()
	for rule, b := range ruleBackends(r) {
		if rule.ClientAddresses == nil {
			continue
		}
		if workloadOf(out, b) == nil {
			t.Fatalf("client-address rule %s routes to %s, where no access policy checks the address", rule.Path, b)
		}
		want := strings.Join(demandedClients(rule), " ")
		for _, w := range out.Workloads {
			if !shareable(b, w.Service) {
				continue
			}
			for _, allow := range w.AuthorizationPolicy.Spec.Rules {
				op := allow.To[0].Operation
				if !oraclePathsMeet(op.Paths[0], BackendPath(rule)) || !methodsMeet(op.Methods, methodStrings(rule.Methods)) {
					continue
				}
				if len(allow.From) != 1 || strings.Join(sourceClients(allow.From[0].Source), " ") != want {
					t.Fatalf("the ALLOW rule %v %v (%s) of %s admits requests to client-address rule %s %v of %s without %s",
						op.Paths, op.Methods, demands(allow), w.Service, rule.Path, rule.Methods, b, want)
				}
			}
		}
	}
}

// checkHeaderChangesSpareTheMesh: no route removes a request header the
// mesh reads after the gateway, or changes a response header Envoy or
// spec.cors owns; the only reserved header Portico sets is its own
// X-Forwarded-For of client-address rules.
func checkHeaderChangesSpareTheMesh(t *testing.T, out Output) {
	t.Helper()
	if vs := out.VirtualService; vs != nil {
		for _, route := range vs.Spec.Http {
			req, resp := route.GetHeaders().GetRequest(), route.GetHeaders().GetResponse()
			for _, name := range req.GetRemove() {
				if porticov1alpha1.IsReservedRequestHeader(name) {
					t.Fatalf("route %s removes %s, which the mesh reads", route.Name, name)
				}
			}
			for name, value := range req.GetSet() {
				if porticov1alpha1.IsReservedRequestHeader(name) && (name != "x-forwarded-for" || value != "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%") {
					t.Fatalf("route %s sets %s: %s", route.Name, name, value)
				}
			}
			var names []string
			names = append(append(names, resp.GetRemove()...), mapKeys(resp.GetSet())...)
			names = append(names, mapKeys(resp.GetAdd())...)
			for _, name := range names {
				if porticov1alpha1.IsReservedResponseHeader(name) {
					t.Fatalf("route %s changes the response header %s", route.Name, name)
				}
			}
		}
	}
	if route := out.HTTPRoute; route != nil {
		for _, rule := range route.Spec.Rules {
			for _, f := range rule.Filters {
				if m := f.RequestHeaderModifier; m != nil {
					for _, name := range m.Remove {
						if porticov1alpha1.IsReservedRequestHeader(name) {
							t.Fatalf("HTTPRoute rule removes %s", name)
						}
					}
				}
				if m := f.ResponseHeaderModifier; m != nil {
					names := slices.Clone(m.Remove)
					for _, h := range append(slices.Clone(m.Set), m.Add...) {
						names = append(names, string(h.Name))
					}
					for _, name := range names {
						if porticov1alpha1.IsReservedResponseHeader(name) {
							t.Fatalf("HTTPRoute rule changes the response header %s", name)
						}
					}
				}
			}
		}
	}
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
