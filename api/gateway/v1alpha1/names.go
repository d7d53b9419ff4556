package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// RouteName is the name of the VirtualService HTTP route (and so of the
// Envoy route) that serves one rule of an APIRule. The apirule controller
// names routes with it and the ratelimit controller finds them by it, so it
// depends only on the APIRule's identity and the rule's path and methods.
func RouteName(namespace, apiRule string, rule Rule) string {
	return namespace + "." + apiRule + "." + ruleHash(rule)
}

// HTTPRouteRuleName is the name of the HTTPRoute rule (a Gateway API
// section name) that serves one rule of an APIRule in HTTPRoute mode:
// "rule-" and the same hash of the rule's path and methods as RouteName,
// so that a policy can address it.
func HTTPRouteRuleName(rule Rule) string { return "rule-" + ruleHash(rule) }

func ruleHash(rule Rule) string {
	methods := make([]string, len(rule.Methods))
	for i, m := range rule.Methods {
		methods[i] = string(m)
	}
	slices.Sort(methods)
	sum := sha256.Sum256([]byte(rule.Path + " " + strings.Join(methods, ",")))
	return hex.EncodeToString(sum[:])[:10]
}
