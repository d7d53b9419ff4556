package main

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/portico-dev/portico/internal/contract"
	"github.com/portico-dev/portico/internal/globallimit"
)

// The binary's flags are exactly those its contract declares, which the
// operator sets and checks extraArgs against.
func TestFlagsAreTheContracts(t *testing.T) {
	g := NewWithT(t)
	var got []string
	newCommand().Flags().VisitAll(func(f *pflag.Flag) { got = append(got, f.Name) })
	g.Expect(got).To(ConsistOf(contract.RateLimitService.Flags))
}

// The service's ports differ: the controllers' health port
// (contract.HealthPort) is the service's gRPC port.
func TestPortsDiffer(t *testing.T) {
	ports := map[int]string{}
	for name, p := range map[string]int{"gRPC": globallimit.GRPCPort, "health": contract.RateLimitServiceHealthPort, "metrics": contract.MetricsPort} {
		if other, ok := ports[p]; ok {
			t.Errorf("%s and %s are both %d", name, other, p)
		}
		ports[p] = name
	}
}
