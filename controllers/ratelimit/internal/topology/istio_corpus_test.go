package topology

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// corpusOut is where TestIstioEnvoyFilters writes the EnvoyFilters test/istio
// judges with Istio's code (that module cannot import this internal package).
var corpusOut = flag.String("corpus-out", "", "write the EnvoyFilters of every RateLimit option, on a gateway and on an APIRule, into this directory for test/istio")

// TestIstioEnvoyFilters computes the EnvoyFilter of every option of
// TestEveryPatchIsValidEnvoyConfig, gateway-wide and per route, and with
// -corpus-out writes each as ratelimit.<option>.<kind>.object.yaml.
func TestIstioEnvoyFilters(t *testing.T) {
	var written int
	for _, name := range slices.Sorted(maps.Keys(specOptions)) {
		for _, kind := range []gatewayv1alpha1.TargetKind{gatewayv1alpha1.TargetGateway, gatewayv1alpha1.TargetAPIRule} {
			target, ns := "public", "istio-system"
			if kind == gatewayv1alpha1.TargetAPIRule {
				target, ns = "orders", "shop"
			}
			in := world(policy(ns, "p", 0, kind, target, specOptions[name]))
			in.Global = testGlobal
			out := Compute(in)
			if len(out.EnvoyFilters) != 1 {
				t.Fatalf("%s/%s: %d EnvoyFilters, want 1", name, kind, len(out.EnvoyFilters))
			}
			ef := out.EnvoyFilters[0]
			if ef.Kind == "" {
				ef.APIVersion, ef.Kind = "networking.istio.io/v1alpha3", "EnvoyFilter"
			}
			if *corpusOut == "" {
				continue
			}
			raw, err := yaml.Marshal(ef)
			if err != nil {
				t.Fatal(err)
			}
			file := "ratelimit." + strings.NewReplacer(" ", "-", ",", "").Replace(name) + "." + strings.ToLower(string(kind)) + ".object.yaml"
			if err := os.MkdirAll(*corpusOut, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(*corpusOut, file), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			written++
		}
	}
	if *corpusOut != "" && written != 2*len(specOptions) {
		t.Fatalf("wrote %d EnvoyFilters, want %d", written, 2*len(specOptions))
	}
}
