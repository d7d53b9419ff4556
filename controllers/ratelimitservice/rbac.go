package main

// RBAC of the rate-limit service (portico-ratelimit-service): in Portico's
// namespace only, read the ConfigMaps of the ratelimit controller's feed
// (globallimit.LabelConfig) and the one key Secret, portico-ratelimit-key
// (globallimit.KeySecretName), whose HMAC key checks the tenant tokens.
// The Redis Secret reaches it as a volume, which needs no RBAC. It serves
// on every replica and takes no Lease.
//
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=secrets,resourceNames=portico-ratelimit-key,verbs=get;list;watch
