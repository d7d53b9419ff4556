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
// depends only on the APIRule's identity and the rule's path, methods and
// match (a rule without match is named as before matches existed).
func RouteName(namespace, apiRule string, rule Rule) string {
	return namespace + "." + apiRule + "." + ruleHash(rule)
}

// HTTPRouteRuleName is the name of the HTTPRoute rule (a Gateway API
// section name) that serves one rule of an APIRule in HTTPRoute mode, so
// that a policy can address it: "rule-" and 20 hex digits of a hash of the
// APIRule's namespace and name and the rule's path, methods and match. Istio names
// the Envoy routes of a named HTTPRoute rule by the bare rule name (since
// 1.24), so the name carries the APIRule's identity: the rules of two
// tenants' APIRules do not share a route name, and 80 bits keep a tenant
// from crafting a collision.
func HTTPRouteRuleName(namespace, apiRule string, rule Rule) string {
	sum := sha256.Sum256([]byte(namespace + "/" + apiRule + " " + rule.Path + " " + sortedMethods(rule) + matchSuffix(rule)))
	return "rule-" + hex.EncodeToString(sum[:])[:20]
}

func ruleHash(rule Rule) string {
	sum := sha256.Sum256([]byte(rule.Path + " " + sortedMethods(rule) + matchSuffix(rule)))
	return hex.EncodeToString(sum[:])[:10]
}

// matchSuffix tells apart rules that share a path and methods and differ
// in their matches; empty without a match, so older names stay.
func matchSuffix(rule Rule) string {
	if key := rule.Match.Key(); key != "" {
		return " match " + key
	}
	return ""
}

// sortedMethods are a rule's methods, sorted and comma separated.
func sortedMethods(rule Rule) string {
	methods := make([]string, len(rule.Methods))
	for i, m := range rule.Methods {
		methods[i] = string(m)
	}
	slices.Sort(methods)
	return strings.Join(methods, ",")
}
