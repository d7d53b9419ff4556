// Package tenancy is Portico's tenant-attack suite for issue 13. It runs
// the real apirule and ratelimit controller binaries against envtest, each
// as a process impersonating its ServiceAccount with the RBAC generated in
// config/rbac, and attacks them as two hostile tenants: impersonated users
// with rights only in their own namespace (the built-in edit and admin
// ClusterRoles, aggregated as in a real cluster, plus write on the status
// subresources: the stronger case). Every attack goes through the API
// server; the outcome is judged on what is stored: the
// AuthorizationPolicies and RequestAuthentications with the Istio semantics
// of package judge, and the VirtualServices' routes.
//
// The suite is tests only; nothing here may be imported by the product.
package tenancy
