//go:build tools

// Package tools pins the commands hack/olmv1.sh builds: OLM v1's
// operator-controller and catalogd, at the version go.mod requires.
package tools

import (
	_ "github.com/operator-framework/operator-controller/cmd/catalogd"
	_ "github.com/operator-framework/operator-controller/cmd/operator-controller"
)
