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
	methods := make([]string, len(rule.Methods))
	for i, m := range rule.Methods {
		methods[i] = string(m)
	}
	slices.Sort(methods)
	sum := sha256.Sum256([]byte(rule.Path + " " + strings.Join(methods, ",")))
	return namespace + "." + apiRule + "." + hex.EncodeToString(sum[:])[:10]
}
