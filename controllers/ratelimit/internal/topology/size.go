package topology

import (
	"encoding/json"
	"fmt"

	networkingv1alpha3client "istio.io/client-go/pkg/apis/networking/v1alpha3"
)

// MaxEnvoyFilterBytes is the budget of one rendered EnvoyFilter's JSON. The
// API server stores objects up to about 1.5 MiB (etcd's request limit), and
// an object near that limit is slow to write, watch and push to every
// gateway; the budget keeps each filter at half of it. The RateLimit CRD's
// bounds keep one RateLimit on an APIRule of 64 rules under the budget
// (about 630 KiB at worst: 16 descriptors with 512 characters that JSON
// escapes to six bytes each, on routes with the longest names), so only a
// namespace that piles several such RateLimits onto one gateway workload
// can exceed it; and since a filter holds the RateLimits of one namespace
// only, only that namespace's RateLimits fail.
const MaxEnvoyFilterBytes = 768 << 10

// Size is the length of the EnvoyFilter's JSON, as sent to the API server.
func Size(ef *networkingv1alpha3client.EnvoyFilter) (int, error) {
	raw, err := json.Marshal(ef)
	if err != nil {
		return 0, fmt.Errorf("encode EnvoyFilter %s/%s: %w", ef.Namespace, ef.Name, err)
	}
	return len(raw), nil
}

// CheckSize returns an error, worded for the status of the RateLimits the
// filter enforces, when the EnvoyFilter exceeds MaxEnvoyFilterBytes.
func CheckSize(ef *networkingv1alpha3client.EnvoyFilter) error {
	size, err := Size(ef)
	if err != nil {
		return err
	}
	if size <= MaxEnvoyFilterBytes {
		return nil
	}
	return fmt.Errorf("EnvoyFilter %s/%s would be %d KiB, over the budget of %d KiB for the rate limits of namespace %s on one gateway workload, so it is not written "+
		"(its previous version, if any, stays in force); limit fewer routes, or use fewer or shorter descriptors",
		ef.Namespace, ef.Name, (size+1023)>>10, MaxEnvoyFilterBytes>>10, ef.Labels[LabelNamespace])
}
