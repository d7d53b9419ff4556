package status

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
)

func ctrl(name string, phase operatorv1alpha1.ControllerPhase, enabled bool, reason string) Controller {
	return Controller{Enabled: enabled, ControllerStatus: operatorv1alpha1.ControllerStatus{
		Name: operatorv1alpha1.ControllerName(name), Phase: phase, Reason: reason, Message: string(phase) + " message",
	}}
}

func TestState(t *testing.T) {
	tests := map[string]struct {
		controllers []Controller
		deleting    bool
		want        operatorv1alpha1.State
	}{
		"all ready":                  {[]Controller{ctrl("a", "Ready", true, ""), ctrl("b", "Ready", true, "")}, false, operatorv1alpha1.StateReady},
		"degraded beats progressing": {[]Controller{ctrl("a", "Degraded", true, ""), ctrl("b", "Progressing", true, "")}, false, operatorv1alpha1.StateError},
		"progressing beats blocked":  {[]Controller{ctrl("a", "Blocked", true, ""), ctrl("b", "Progressing", true, "")}, false, operatorv1alpha1.StateProcessing},
		"enabled blocked warns":      {[]Controller{ctrl("a", "Blocked", true, ""), ctrl("b", "Ready", true, "")}, false, operatorv1alpha1.StateWarning},
		"disabled is ready":          {[]Controller{ctrl("a", "Disabled", false, ""), ctrl("b", "Ready", true, "")}, false, operatorv1alpha1.StateReady},
		"deleting beats everything":  {[]Controller{ctrl("a", "Degraded", true, "")}, true, operatorv1alpha1.StateDeleting},
		"nothing enabled":            {[]Controller{ctrl("a", "Disabled", false, "")}, false, operatorv1alpha1.StateReady},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(State(tc.controllers, tc.deleting)).To(Equal(tc.want))
		})
	}
}

func TestReadySummary(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ReadySummary([]Controller{ctrl("a", "Ready", true, ""), ctrl("b", "Blocked", true, ""), ctrl("c", "Disabled", false, "")})).To(Equal("1/2"))
	g.Expect(ReadySummary(nil)).To(Equal("0/0"))
}

func TestSetReadyCondition(t *testing.T) {
	tests := map[string]struct {
		state       operatorv1alpha1.State
		controllers []Controller
		status      metav1.ConditionStatus
		reason      string
		message     string
	}{
		"ready": {
			state: operatorv1alpha1.StateReady, controllers: []Controller{ctrl("a", "Ready", true, "")},
			status: metav1.ConditionTrue, reason: operatorv1alpha1.ReasonAllControllersReady, message: "all 1 enabled controllers are ready",
		},
		"none enabled": {
			state: operatorv1alpha1.StateReady, controllers: []Controller{ctrl("a", "Disabled", false, "")},
			status: metav1.ConditionTrue, reason: operatorv1alpha1.ReasonNoControllersEnabled, message: "no controller is enabled",
		},
		"blocked names the controller": {
			state: operatorv1alpha1.StateWarning, controllers: []Controller{ctrl("a", "Ready", true, ""), ctrl("b", "Blocked", true, "")},
			status: metav1.ConditionFalse, reason: operatorv1alpha1.ReasonControllersBlocked, message: "b is Blocked: Blocked message",
		},
		"apply failure": {
			state: operatorv1alpha1.StateError, controllers: []Controller{ctrl("a", "Degraded", true, operatorv1alpha1.ReasonDeploymentApplyFailed)},
			status: metav1.ConditionFalse, reason: operatorv1alpha1.ReasonApplyFailed, message: "a is Degraded: Degraded message",
		},
		"degraded and progressing": {
			state: operatorv1alpha1.StateError, controllers: []Controller{ctrl("a", "Degraded", true, ""), ctrl("b", "Progressing", true, "")},
			status: metav1.ConditionFalse, reason: operatorv1alpha1.ReasonControllersDegraded, message: "a is Degraded: Degraded message; b is Progressing: Progressing message",
		},
		"deleting": {
			state: operatorv1alpha1.StateDeleting, controllers: []Controller{ctrl("a", "Ready", true, "")},
			status: metav1.ConditionFalse, reason: operatorv1alpha1.ReasonDeleting, message: "the APIGateway is being deleted; managed controller Deployments are being removed",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var conds []metav1.Condition
			SetReadyCondition(&conds, tc.state, tc.controllers, 7, t0)
			c := meta.FindStatusCondition(conds, operatorv1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.Message).To(Equal(tc.message))
			g.Expect(c.ObservedGeneration).To(BeEquivalentTo(7))
		})
	}
}

func TestComputeIsStableAndKeepsTransitionTimes(t *testing.T) {
	g := NewWithT(t)
	in := Input{
		Generation:  3,
		Controllers: []Controller{ctrl("ratelimit", "Blocked", true, ""), ctrl("apirule", "Ready", true, "")},
		Now:         t0,
	}
	first := Compute(in)
	g.Expect(first.Controllers[0].Name).To(BeEquivalentTo("apirule"), "sorted by name")
	g.Expect(first.State).To(Equal(operatorv1alpha1.StateWarning))
	g.Expect(first.Ready).To(Equal("1/2"))
	g.Expect(first.ObservedGeneration).To(BeEquivalentTo(3))

	// Same cluster a minute later: identical status, so no write.
	in.Previous, in.Now = first, t1
	g.Expect(Compute(in)).To(Equal(first))

	// ratelimit becomes Ready: only its transition time moves.
	in.Controllers[0] = ctrl("ratelimit", "Ready", true, "")
	second := Compute(in)
	g.Expect(second.Controllers[0].LastTransitionTime).To(Equal(t0))
	g.Expect(second.Controllers[1].LastTransitionTime).To(Equal(t1))
	g.Expect(meta.FindStatusCondition(second.Conditions, operatorv1alpha1.ConditionReady).LastTransitionTime).To(Equal(t1))
	g.Expect(second.State).To(Equal(operatorv1alpha1.StateReady))
}

func TestComputeBoundsMessagesToTheAPILimits(t *testing.T) {
	g := NewWithT(t)
	huge := ctrl("apirule", "Degraded", true, operatorv1alpha1.ReasonDeploymentApplyFailed)
	huge.Message = `apply deployment portico-system/apirule-controller: Deployment.apps "apirule-controller" is invalid: ` +
		strings.Repeat("spec.template.spec.nodeSelector: Invalid value: \"ü\": must be no more than 63 characters; ", 200)
	invalid := ctrl("ratelimit", "Degraded", true, operatorv1alpha1.ReasonCrashLoopBackOff)
	invalid.Message = "pod ratelimit-controller-x container manager: last words \xff\xfe"

	st := Compute(Input{Generation: 1, Controllers: []Controller{huge, invalid}, Now: t0})

	rule := st.Controllers[0]
	g.Expect(len(rule.Message)).To(BeNumerically("<=", contract.ControllerStatusMaxLength))
	g.Expect(rule.Message).To(HavePrefix(`apply deployment portico-system/apirule-controller: Deployment.apps "apirule-controller" is invalid`))
	g.Expect(rule.Message).To(HaveSuffix(contract.TruncatedNote))
	g.Expect(utf8.ValidString(rule.Message)).To(BeTrue())
	g.Expect(st.Controllers[1].Message).To(Equal("pod ratelimit-controller-x container manager: last words \uFFFD"))

	ready := meta.FindStatusCondition(st.Conditions, operatorv1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(len(ready.Message)).To(BeNumerically("<=", contract.ConditionMaxLength))
	g.Expect(utf8.ValidString(ready.Message)).To(BeTrue())
	g.Expect(ready.Message).To(ContainSubstring(rule.Message), "the condition repeats the bounded message")
}

func TestReadyConditionMessageIsBounded(t *testing.T) {
	g := NewWithT(t)
	var controllers []Controller
	for i := range 40 {
		c := ctrl(fmt.Sprintf("c%02d", i), "Degraded", true, operatorv1alpha1.ReasonCrashLoopBackOff)
		c.Message = strings.Repeat("é", 2000) // 4000 bytes each: the joined message is far over 32 KiB
		controllers = append(controllers, c)
	}
	var conditions []metav1.Condition
	SetReadyCondition(&conditions, operatorv1alpha1.StateError, controllers, 1, t0)
	g.Expect(len(conditions[0].Message)).To(BeNumerically("<=", contract.ConditionMaxLength))
	g.Expect(utf8.ValidString(conditions[0].Message)).To(BeTrue())
	g.Expect(conditions[0].Message).To(HaveSuffix(contract.TruncatedNote))
}
