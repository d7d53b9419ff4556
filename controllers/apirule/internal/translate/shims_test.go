package translate

import (
	securityv1beta1 "istio.io/api/security/v1beta1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	porticov1alpha1 "github.com/portico-dev/portico/api/gateway/v1alpha1"
	"github.com/portico-dev/portico/controllers/apirule/internal/access"
	"github.com/portico-dev/portico/controllers/apirule/internal/paths"
	"github.com/portico-dev/portico/controllers/apirule/internal/plan"
	"github.com/portico-dev/portico/controllers/apirule/internal/render/gatewayapi"
)

// The tests of this package were written against the one package the
// translation was; these names keep them reading as they did, now that
// the code lives in plan, access, paths and the renderers.

type Access = access.Access

var (
	ErrForgesRequest       = plan.ErrForgesRequest
	AuthorizationConflict  = access.AuthorizationConflict
	AuthenticationConflict = access.AuthenticationConflict
	CustomConflict         = access.CustomConflict
	Parent                 = plan.Parent
	PolicyName             = plan.PolicyName
	ExtAuthPolicyName      = plan.ExtAuthPolicyName
	BackendPath            = plan.BackendPath
	Backends               = plan.Backends
	DefaultService         = plan.DefaultService
	Services               = plan.Services
	serviceOf              = plan.ServiceOf
	methodStrings          = plan.MethodStrings
	pathsMeet              = paths.Meet
	isTemplate             = paths.IsTemplate
	templateRegex          = paths.Regex
	checkTemplate          = paths.CheckTemplate
	gatewayDuration        = gatewayapi.Duration
)

// planRule is one rule of a one-rule APIRule's plan.
func planRule(rule porticov1alpha1.Rule) *plan.Rule {
	r := newAPIRule(withRules(rule))
	return plan.New(Input{APIRule: r}).Rules[0]
}

func pathMatches(rule porticov1alpha1.Rule) []gwapiv1.HTTPRouteMatch {
	return gatewayapi.PathMatches(planRule(rule))
}

func sameAuthentication(a, b porticov1alpha1.Rule) bool {
	rules := plan.New(Input{APIRule: newAPIRule(withRules(a, b))}).Rules
	return plan.SameAuthentication(rules[0], rules[1])
}

func authentication(rule porticov1alpha1.Rule) string { return plan.Authentication(planRule(rule)) }

func callerOf(r *securityv1beta1.Rule) string { return access.CallerOf(r) }

func withNamespace(s porticov1alpha1.ServiceReference, ns string) porticov1alpha1.ServiceReference {
	if s.Namespace == "" {
		s.Namespace = ns
	}
	return s
}
