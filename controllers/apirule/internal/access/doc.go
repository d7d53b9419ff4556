// Package access is the access model of APIRules: what a rule demands of
// a caller (OfJWT: issuers with their key sets and token places, claims
// alternatives, in one canonical form whatever form of jwt wrote it), and
// the comparison of access control written on one workload by different
// APIRules (AuthorizationConflict, AuthenticationConflict, CustomConflict),
// which the apirule controller runs across APIRules. It reads Istio's
// policies as Istio does (ALLOW rules add up, JWT rules of an issuer merge,
// one external authorizer per workload); it builds no objects and reads
// nothing from the cluster.
package access
