package render

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
)

func TestRefusal(t *testing.T) {
	tests := map[string]struct {
		spec        operatorv1alpha1.ControllerSpec
		wantMessage string // empty: accepted
	}{
		"no extraArgs":                   {},
		"declared flags":                 {spec: operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--kube-api-qps=50", "--kube-api-burst=100", "--graceful-shutdown-timeout=20s"}}},
		"a value with = and spaces kept": {spec: operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--namespace=a=b c"}}},
		"an unknown flag": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--kube-api-qps=50", "--debug-everything=true"}},
			wantMessage: "extraArgs flag --debug-everything is not a flag of apirule-controller (it takes: --graceful-shutdown-timeout, --kube-api-burst, --kube-api-qps, --kube-api-timeout, --namespace, --pprof-bind-address)",
		},
		"a reserved flag: leader election": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--leader-elect=false"}},
			wantMessage: "extraArgs flag --leader-elect is set by the operator and may not be overridden",
		},
		"a reserved flag: the log level": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--log-level=debug"}},
			wantMessage: "extraArgs flag --log-level is set by the operator and may not be overridden",
		},
		"a reserved flag: the probes' address": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--health-probe-bind-address=:9999"}},
			wantMessage: "extraArgs flag --health-probe-bind-address is set by the operator and may not be overridden",
		},
		"--version would exit": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--version=true"}},
			wantMessage: "extraArgs flag --version is set by the operator and may not be overridden",
		},
		"no value": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--namespace"}},
			wantMessage: `extraArgs entry "--namespace" is not a flag in the form --name=value`,
		},
		"a positional argument": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"team-a"}},
			wantMessage: `extraArgs entry "team-a" is not a flag in the form --name=value`,
		},
		"a single dash": {
			spec:        operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"-namespace=x"}},
			wantMessage: `extraArgs entry "-namespace=x" is not a flag in the form --name=value`,
		},
		"the budget's defaults": {spec: operatorv1alpha1.ControllerSpec{Replicas: ptr.To[int32](2), PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(0))}}},
		"a negative minAvailable": {
			spec:        operatorv1alpha1.ControllerSpec{PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(-1))}},
			wantMessage: "podDisruptionBudget.minAvailable must not be negative, not -1",
		},
		"a negative maxUnavailable": {
			spec:        operatorv1alpha1.ControllerSpec{PodDisruptionBudget: &operatorv1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(-2))}},
			wantMessage: "podDisruptionBudget.maxUnavailable must not be negative, not -2",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			message, refused := Refusal(apirule, tc.spec)
			g.Expect(refused).To(Equal(tc.wantMessage != ""))
			g.Expect(message).To(Equal(tc.wantMessage))
		})
	}
}

func TestExtraArgsFollowTheOperatorsFlags(t *testing.T) {
	g := NewWithT(t)
	args := Deployment(input(operatorv1alpha1.ControllerSpec{ExtraArgs: []string{"--kube-api-qps=50"}})).Spec.Template.Spec.Containers[0].Args
	g.Expect(args).To(HaveLen(5))
	g.Expect(args[4]).To(Equal("--kube-api-qps=50"), "appended last")
}
