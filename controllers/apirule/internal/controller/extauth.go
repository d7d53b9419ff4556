package controller

import (
	"fmt"
	"strings"

	securityv1 "istio.io/client-go/pkg/apis/security/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/access"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
)

// ungrantedAuthorizers explains which external authorizers the APIRule's
// rules name that the administrator's grants (the APIGateway's
// spec.apiRules.extAuthProviders) do not give its namespace, or returns
// "". An authorizer sees the requests it decides on, headers and tokens
// included, and its answer lets them in: only the administrator, who
// configures it in Istio, says which teams may use it.
func ungrantedAuthorizers(rule *porticov1alpha1.APIRule, grants *operatorv1alpha1.APIRulesSpec) string {
	var missing []string
	for _, name := range plan.Authorizers(rule) {
		if !grants.GrantsAuthorizer(name, rule.Namespace) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("external authorizer %s is not granted to namespace %s: the cluster administrator grants authorizers in the APIGateway (spec.apiRules.extAuthProviders); the APIRule's Istio objects were removed",
		strings.Join(missing, ", "), rule.Namespace)
}

// accessSets pairs live AuthorizationPolicies (of one namespace) into the
// access control of one APIRule on one backend: an ALLOW policy and the
// CUSTOM policy named after it (plan.CustomPolicyOf) of the same
// APIRule. A CUSTOM policy without its ALLOW policy stands alone.
func accessSets(aps []*securityv1.AuthorizationPolicy) []access.Access {
	owner := func(ap *securityv1.AuthorizationPolicy) string {
		return ap.Labels[plan.LabelAPIRuleNamespace] + "/" + ap.Labels[plan.LabelAPIRule]
	}
	customs := map[string]*securityv1.AuthorizationPolicy{}
	for _, ap := range aps {
		if access.IsCustom(ap) {
			customs[owner(ap)+" "+ap.Name] = ap
		}
	}
	var out []access.Access
	for _, ap := range aps {
		if access.IsCustom(ap) {
			continue
		}
		key := owner(ap) + " " + plan.CustomPolicyOf(ap.Name)
		out = append(out, access.Access{Allow: ap, Custom: customs[key]})
		delete(customs, key)
	}
	for _, ap := range aps {
		if access.IsCustom(ap) && customs[owner(ap)+" "+ap.Name] != nil {
			out = append(out, access.Access{Custom: ap})
		}
	}
	return out
}

// customConflict is the first meeting of one workload's access control
// of this APIRule with external authorization, its own or another's.
func customConflict(own access.Access, others []access.Access) string {
	for _, other := range others {
		if c := access.CustomConflict(own, other); c != "" {
			return c + "; another APIRule's live AuthorizationPolicies guard those requests"
		}
	}
	return ""
}
