package config

import "github.com/portico-dev/portico/internal/globallimit"

// labelSelector selects the feed's ConfigMaps: every ConfigMap labelled
// LabelConfig, so that one with the label but not trusted is seen, counted
// and logged rather than silently missing.
func labelSelector() string { return globallimit.LabelConfig }

func keySecretName() string { return globallimit.KeySecretName }
