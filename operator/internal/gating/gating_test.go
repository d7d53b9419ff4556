package gating

import (
	"testing"

	. "github.com/onsi/gomega"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/operator/internal/catalog"
)

var testEntry = catalog.Entry{
	Name: "ratelimit",
	RequiredCRDs: []catalog.CRD{
		{Name: "ratelimits.gateway.portico.dev", Version: "v1alpha1"},
		{Name: "envoyfilters.networking.istio.io", Version: "v1alpha3"},
	},
	DependsOn:               []operatorv1alpha1.ControllerName{"apirule"},
	ProgressDeadlineSeconds: 600,
}

func ready(versions ...string) CRDState {
	return CRDState{Established: true, ServedVersions: versions}
}

func allCRDs() map[string]CRDState {
	return map[string]CRDState{
		"ratelimits.gateway.portico.dev":   ready("v1alpha1"),
		"envoyfilters.networking.istio.io": ready("v1alpha3"),
	}
}

func with(crds map[string]CRDState, name string, state *CRDState) map[string]CRDState {
	if state == nil {
		delete(crds, name)
	} else {
		crds[name] = *state
	}
	return crds
}

func TestEvaluate(t *testing.T) {
	apiruleReady := map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase{"apirule": operatorv1alpha1.PhaseReady}
	tests := map[string]struct {
		enabled bool
		crds    map[string]CRDState
		phases  map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase
		want    Result
	}{
		"everything present runs": {
			enabled: true, crds: allCRDs(), phases: apiruleReady,
			want: Result{Run: true},
		},
		"disabled wins over missing CRDs": {
			enabled: false, crds: nil,
			want: Result{Phase: operatorv1alpha1.PhaseDisabled, Reason: operatorv1alpha1.ReasonDisabled,
				Message: "ratelimit is disabled in spec.controllers"},
		},
		"no CRD installed names both": {
			enabled: true, crds: nil, phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: ratelimits.gateway.portico.dev/v1alpha1, envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"ratelimits.gateway.portico.dev/v1alpha1", "envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"EnvoyFilter CRD deleted": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", nil), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"CRD not established yet": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", &CRDState{ServedVersions: []string{"v1alpha3"}}), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotEstablished,
				Message:     "waiting for required CRDs (not established or being deleted: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"CRD being deleted": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", &CRDState{Established: true, Terminating: true, ServedVersions: []string{"v1alpha3"}}), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotEstablished,
				Message:     "waiting for required CRDs (not established or being deleted: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"required version no longer served": {
			enabled: true, crds: with(allCRDs(), "envoyfilters.networking.istio.io", &CRDState{Established: true, ServedVersions: []string{"v1"}}), phases: apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDVersionNotServed,
				Message:     "waiting for required CRDs (version not served: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"missing and unserved: reason is the most fundamental, both listed": {
			enabled: true,
			crds:    map[string]CRDState{"envoyfilters.networking.istio.io": {Established: true, ServedVersions: []string{"v1"}}},
			phases:  apiruleReady,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonCRDNotFound,
				Message:     "waiting for required CRDs (not installed: ratelimits.gateway.portico.dev/v1alpha1; version not served: envoyfilters.networking.istio.io/v1alpha3)",
				MissingCRDs: []string{"ratelimits.gateway.portico.dev/v1alpha1", "envoyfilters.networking.istio.io/v1alpha3"}},
		},
		"dependency progressing": {
			enabled: true, crds: allCRDs(),
			phases: map[operatorv1alpha1.ControllerName]operatorv1alpha1.ControllerPhase{"apirule": operatorv1alpha1.PhaseProgressing},
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonDependencyNotReady,
				Message: "waiting for controllers it depends on to be Ready: apirule (Progressing)"},
		},
		"dependency not evaluated": {
			enabled: true, crds: allCRDs(), phases: nil,
			want: Result{Phase: operatorv1alpha1.PhaseBlocked, Reason: operatorv1alpha1.ReasonDependencyNotReady,
				Message: "waiting for controllers it depends on to be Ready: apirule (Unknown)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := Evaluate(Input{Entry: testEntry, Enabled: tc.enabled, Cluster: Cluster{CRDs: tc.crds, Phases: tc.phases}})
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
