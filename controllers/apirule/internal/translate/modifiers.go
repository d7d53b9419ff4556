package translate

import (
	"fmt"
	"slices"

	gatewayv1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
)

// checkRequestModifiers repeats the API server's checks of the rules'
// request modifiers (retries, request headers and cookies, rewrites): the
// controller must not rely on admission, whose rules a CRD upgrade or a
// cluster without CEL could miss.
func checkRequestModifiers(r *gatewayv1alpha1.APIRule) error {
	for _, rule := range r.Spec.Rules {
		if err := checkRetries(r, rule); err != nil {
			return err
		}
	}
	return nil
}

// checkRetries bounds a rule's retries as the CRD does.
func checkRetries(r *gatewayv1alpha1.APIRule, rule gatewayv1alpha1.Rule) error {
	p := rule.Retries
	if p == nil {
		return nil
	}
	if p.Attempts < 1 || p.Attempts > 10 {
		return fmt.Errorf("rule %s: retries.attempts must be from 1 to 10, not %d", rule.Path, p.Attempts)
	}
	if len(p.Codes) == 0 && len(p.RetryOn) == 0 {
		return fmt.Errorf("rule %s: retries needs codes, retryOn or both", rule.Path)
	}
	for _, c := range p.RetryOn {
		if !slices.Contains(gatewayv1alpha1.RetryConditions, c) {
			return fmt.Errorf("rule %s: retry condition %q is not one of %v", rule.Path, c, gatewayv1alpha1.RetryConditions)
		}
	}
	for _, c := range p.Codes {
		if c < 400 || c > 599 {
			return fmt.Errorf("rule %s: retry code %d is not from 400 to 599", rule.Path, c)
		}
	}
	timeout := rule.Timeout
	if timeout == nil {
		timeout = r.Spec.Timeout
	}
	if p.PerTryTimeout != nil && timeout != nil && p.PerTryTimeout.Duration > timeout.Duration {
		return fmt.Errorf("rule %s: retries.perTryTimeout %s exceeds the timeout %s that bounds all tries", rule.Path, p.PerTryTimeout.Duration, timeout.Duration)
	}
	return nil
}
