package explain

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// rateLimitSteps says which buckets of the visible RateLimits count a
// request the gateway routed by a rule of APIRule ruleKey ("namespace/
// name", "" when the route is no APIRule's): those targeting that APIRule
// and those targeting the gateway. Whether a RateLimit counts at all is
// its controller's verdict (its Ready condition: Enforced), read from its
// status, never recomputed here; which of its buckets match is the
// request's path (a prefix of it) and headers (exact values, names
// regardless of case), as its EnvoyFilter's actions match them.
func (e *Explanation) rateLimitSteps(w World, ruleKey string, q Query) {
	gwNamespace, gwName, _ := strings.Cut(w.Gateway, "/")
	for _, rl := range w.RateLimits {
		t := rl.Spec.TargetRef
		var scope string
		switch {
		case t.Kind == gatewayv1alpha1.TargetAPIRule && rl.Namespace+"/"+t.Name == ruleKey:
			scope = "the route's own"
		case rl.Namespace == gwNamespace && t.Name == gwName && (w.GatewayAPI && t.IsGatewayAPIGateway() || !w.GatewayAPI && t.IsIstioGateway()):
			scope = "the gateway-wide"
		default:
			continue
		}
		key := "RateLimit " + rl.Namespace + "/" + rl.Name
		ready := meta.FindStatusCondition(rl.Status.Conditions, gatewayv1alpha1.ConditionReady)
		if ready == nil || ready.Reason != gatewayv1alpha1.ReasonEnforced {
			reason := "no verdict yet"
			if ready != nil {
				reason = ready.Reason + ": " + ready.Message
			}
			e.step("ratelimit", fmt.Sprintf("%s targets it but counts nothing: not enforced (%s)", key, reason), key)
			continue
		}
		if buckets := bucketsOf(rl.Spec, q); len(buckets) > 0 {
			e.step("ratelimit", fmt.Sprintf("%s counts it in %s limits: %s", key, scope, strings.Join(buckets, "; ")), key)
		}
	}
}

// bucketsOf lists the buckets of spec that count q.
func bucketsOf(spec gatewayv1alpha1.RateLimitSpec, q Query) []string {
	var out []string
	if spec.Local != nil {
		// Envoy's local rate limit consumes its default bucket for every
		// request (always_consume_default_token_bucket defaults to true),
		// and the bucket of every descriptor that matches as well.
		out = append(out, "local bucket "+bucket(*spec.Local)+" per gateway pod")
		for i, d := range spec.Descriptors {
			if matches(d.Path, d.Header, q) {
				b := *spec.Local
				if d.Bucket != nil {
					b = *d.Bucket
				}
				out = append(out, fmt.Sprintf("descriptor %d's local bucket %s per gateway pod", i, bucket(b)))
			}
		}
	}
	if spec.Global != nil {
		for _, r := range spec.Global.Rules {
			var path string
			var header *gatewayv1alpha1.HeaderMatch
			if r.Match != nil {
				path, header = r.Match.Path, r.Match.Header
			}
			if !matches(path, header, q) {
				continue
			}
			s := fmt.Sprintf("global rule %s, %d per %s shared by every gateway pod", r.Name, r.Requests, strings.ToLower(string(r.Unit)))
			if keys := clientKeys(r.ClientKeys, q); keys != "" {
				s += ", " + keys
			}
			out = append(out, s)
		}
	}
	return out
}

func bucket(b gatewayv1alpha1.TokenBucket) string {
	return fmt.Sprintf("(%d tokens, %d per %s)", b.MaxTokens, b.TokensPerFill, b.FillInterval.Duration)
}

// matches applies a descriptor's or a global rule's match: a path prefix
// and an exact header value, both when both are set.
func matches(path string, header *gatewayv1alpha1.HeaderMatch, q Query) bool {
	if path != "" && !strings.HasPrefix(q.Path, path) {
		return false
	}
	if header == nil {
		return true
	}
	v, ok := headerValue(q.Headers, header.Name)
	return ok && v == header.Value
}

func headerValue(headers map[string]string, name string) (string, bool) {
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// clientKeys says which per-client budget of a rule the request falls in.
func clientKeys(keys []gatewayv1alpha1.ClientKey, q Query) string {
	var parts []string
	for _, k := range keys {
		switch k.Type {
		case gatewayv1alpha1.ClientKeyHeader:
			if v, ok := headerValue(q.Headers, k.Header); ok {
				parts = append(parts, fmt.Sprintf("header %s %q", strings.ToLower(k.Header), v))
			} else {
				parts = append(parts, fmt.Sprintf("without header %s (one budget for all who lack it)", strings.ToLower(k.Header)))
			}
		case gatewayv1alpha1.ClientKeyClientAddress:
			parts = append(parts, "the client's address as the gateway trusts it")
		case gatewayv1alpha1.ClientKeyJWTClaim:
			if v, ok := claimValue(q.Token, k.Claim); ok {
				parts = append(parts, fmt.Sprintf("claim %s %q of a validated token of %s", k.Claim.Name, v, k.Claim.Issuer))
			} else {
				parts = append(parts, fmt.Sprintf("claim %s of a validated token of %s", k.Claim.Name, k.Claim.Issuer))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "per " + strings.Join(parts, " and ")
}

// claimValue is the claim of the request's token a JWTClaim key reads, if
// the token is of the key's issuer and has it.
func claimValue(t *Token, c *gatewayv1alpha1.JWTClaimKey) (string, bool) {
	if t == nil || t.Issuer != c.Issuer {
		return "", false
	}
	if c.Name == "sub" {
		return t.Subject, t.Subject != ""
	}
	if vs := t.Claims[c.Name]; len(vs) == 1 {
		return vs[0], true
	}
	return "", false
}
