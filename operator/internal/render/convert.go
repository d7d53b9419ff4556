package render

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// The spec carries user-provided core types (env, tolerations, affinity);
// apply configurations mirror their JSON exactly, so a JSON round trip is a
// faithful, deterministic conversion without hand-written field copies.
func asApplyConfiguration[T any](in any) *T {
	raw, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", in, err)) // core types always marshal
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		panic(fmt.Sprintf("unmarshal into %T: %v", out, err)) // same schema on both sides
	}
	return out
}

func envVar(in corev1.EnvVar) *corev1ac.EnvVarApplyConfiguration {
	return asApplyConfiguration[corev1ac.EnvVarApplyConfiguration](in)
}

func toleration(in corev1.Toleration) *corev1ac.TolerationApplyConfiguration {
	return asApplyConfiguration[corev1ac.TolerationApplyConfiguration](in)
}

func affinity(in *corev1.Affinity) *corev1ac.AffinityApplyConfiguration {
	return asApplyConfiguration[corev1ac.AffinityApplyConfiguration](in)
}

func topologySpreadConstraint(in corev1.TopologySpreadConstraint) *corev1ac.TopologySpreadConstraintApplyConfiguration {
	return asApplyConfiguration[corev1ac.TopologySpreadConstraintApplyConfiguration](in)
}
