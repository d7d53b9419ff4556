//go:build tools

// Package tools pins the commands hack/testbin.sh --olm builds.
package tools

import (
	_ "github.com/grpc-ecosystem/grpc-health-probe"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/package-server"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
	_ "github.com/operator-framework/operator-registry/cmd/opm"
	_ "github.com/u-root/u-root/cmds/core/cp"
)
