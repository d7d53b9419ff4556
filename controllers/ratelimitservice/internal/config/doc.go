// Package config keeps the rate-limit service's view of what the
// ratelimit controller publishes in Portico's namespace: the tenants'
// limits (one ConfigMap per tenant namespace, labelled
// globallimit.LabelConfig) and the token key (the Secret
// globallimit.KeySecretName). Two informers, restricted to that namespace,
// to the label and to the Secret's name, feed a Feed; a change applies to
// the next decision, without a restart.
//
// A ConfigMap is trusted only when it is labelled
// globallimit.LabelManagedBy=globallimit.ManagedBy, its
// globallimit.LabelNamespace label equals its data's namespace and its name
// is globallimit.ConfigMapName of that namespace (Trusted). A ConfigMap
// that fails these checks or Parse is counted and logged, and its
// namespace keeps its last good Config: bad input loses nothing. Deleting
// a tenant's ConfigMap removes its limits.
//
// The package decides no rate limit and talks to nothing but the API
// server.
package config
