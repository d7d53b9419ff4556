package controller

// RBAC of the global rate limits, in Portico's namespace only: the
// ConfigMaps of the rate-limit service's feed (globallimit.LabelConfig),
// which the controller writes and removes, and the key Secret
// portico-ratelimit-key (globallimit.KeySecretName), which it creates once
// and reads. create cannot be restricted by name, so the Secret rule names
// none; get/list/watch read Portico's namespace only.
//
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=portico-system,resources=secrets,verbs=get;list;watch;create
