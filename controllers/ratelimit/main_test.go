package main

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/portico-dev/portico/controllers/internal/runner"
	"github.com/portico-dev/portico/internal/contract"
)

// The binary's flags are exactly those its contract declares, which the
// operator checks extraArgs against.
func TestFlagsAreTheContracts(t *testing.T) {
	g := NewWithT(t)
	var got []string
	runner.NewCommand(command()).Flags().VisitAll(func(f *pflag.Flag) { got = append(got, f.Name) })
	g.Expect(got).To(ConsistOf(contract.RateLimit.Flags))
}
