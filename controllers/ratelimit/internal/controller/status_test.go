package controller

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/ratelimit/internal/topology"
)

func TestConditions(t *testing.T) {
	type want struct{ status, reason, message string }
	tests := map[string]struct {
		verdict                   topology.Verdict
		writeErr                  error
		ready, accepted, enforced want
	}{
		"enforced": {
			verdict:  topology.Verdict{Reason: gatewayv1alpha1.ReasonEnforced, Message: "enforced on the pods", EnvoyFilters: []string{"a/f"}},
			ready:    want{"True", gatewayv1alpha1.ReasonEnforced, "enforced on the pods"},
			accepted: want{"True", gatewayv1alpha1.ReasonAccepted, "the target accepts the limit"},
			enforced: want{"True", gatewayv1alpha1.ReasonEnforced, "enforced on the pods"},
		},
		"its EnvoyFilter could not be written": {
			verdict:  topology.Verdict{Reason: gatewayv1alpha1.ReasonEnforced, Message: "enforced on the pods", EnvoyFilters: []string{"a/f"}},
			writeErr: errors.New("EnvoyFilter a/f would be 900 KiB"),
			ready:    want{"False", gatewayv1alpha1.ReasonEnvoyFilterFailed, "EnvoyFilter a/f would be 900 KiB"},
			accepted: want{"True", gatewayv1alpha1.ReasonAccepted, "the target accepts the limit"},
			enforced: want{"False", gatewayv1alpha1.ReasonEnvoyFilterFailed, "EnvoyFilter a/f would be 900 KiB"},
		},
		"accepted, but no pods to limit": {
			verdict:  topology.Verdict{Reason: gatewayv1alpha1.ReasonNotEnforced, Message: "no pod labelled"},
			ready:    want{"False", gatewayv1alpha1.ReasonNotEnforced, "no pod labelled"},
			accepted: want{"True", gatewayv1alpha1.ReasonAccepted, "the target accepts the limit"},
			enforced: want{"False", gatewayv1alpha1.ReasonNotEnforced, "no pod labelled"},
		},
		"target not found": {
			verdict:  topology.Verdict{Reason: gatewayv1alpha1.ReasonTargetNotFound, Message: "Gateway API gateway a/edge not found"},
			ready:    want{"False", gatewayv1alpha1.ReasonTargetNotFound, "Gateway API gateway a/edge not found"},
			accepted: want{"False", gatewayv1alpha1.ReasonTargetNotFound, "Gateway API gateway a/edge not found"},
			enforced: want{"False", gatewayv1alpha1.ReasonNotEnforced, "Gateway API gateway a/edge not found"},
		},
		"conflicted": {
			verdict:  topology.Verdict{Reason: gatewayv1alpha1.ReasonConflicted, Message: "already limited"},
			ready:    want{"False", gatewayv1alpha1.ReasonConflicted, "already limited"},
			accepted: want{"False", gatewayv1alpha1.ReasonConflicted, "already limited"},
			enforced: want{"False", gatewayv1alpha1.ReasonNotEnforced, "already limited"},
		},
		"invalid": {
			verdict:  topology.Verdict{Reason: gatewayv1alpha1.ReasonInvalid, Message: "name too long"},
			ready:    want{"False", gatewayv1alpha1.ReasonInvalid, "name too long"},
			accepted: want{"False", gatewayv1alpha1.ReasonInvalid, "name too long"},
			enforced: want{"False", gatewayv1alpha1.ReasonNotEnforced, "name too long"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got := map[string]want{}
			for _, c := range Conditions(tc.verdict, tc.writeErr, 7) {
				g.Expect(c.ObservedGeneration).To(Equal(int64(7)))
				got[c.Type] = want{string(c.Status), c.Reason, c.Message}
			}
			g.Expect(got).To(Equal(map[string]want{
				gatewayv1alpha1.ConditionReady: tc.ready, gatewayv1alpha1.ConditionAccepted: tc.accepted, gatewayv1alpha1.ConditionEnforced: tc.enforced,
			}))
		})
	}
}
