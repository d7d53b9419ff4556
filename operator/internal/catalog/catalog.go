package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	operatorv1alpha1 "github.com/portico-dev/portico/api/operator/v1alpha1"
	"github.com/portico-dev/portico/internal/contract"
)

// CRD is a CustomResourceDefinition and the version a controller needs.
type CRD = contract.CRD

// Entry describes one controller of the catalog.
type Entry struct {
	// Controller is the controller's side of the contract: its name in the
	// APIGateway spec, binary and image names, and the CRDs that must all
	// be Established and serve their version before it runs.
	contract.Controller
	// Description is one line for `portico-operator catalog`.
	Description string
	// SpecCRDs are required too, each only while the APIGateway's spec
	// chooses what needs it (a certificate source, say).
	SpecCRDs []SpecCRD
	// DependsOn names controllers that must be Ready before this one runs.
	DependsOn []operatorv1alpha1.ControllerName
	// Args are passed to the controller binary after the standard flags.
	Args []string
	// ProgressDeadlineSeconds of the controller's Deployment.
	ProgressDeadlineSeconds int32
	// NeedsGlobalRateLimits runs the entry only while
	// spec.rateLimits.global is set and its Redis Secret is usable
	// (gating.CheckGlobalRateLimits).
	NeedsGlobalRateLimits bool
}

// SpecCRD is a CRD a controller needs only for some APIGateway specs.
type SpecCRD struct {
	CRD
	// When says, for status messages, what in the spec needs the CRD.
	When string
	// Needed reports whether the spec needs the CRD; spec may be nil.
	Needed func(spec *operatorv1alpha1.APIGatewaySpec) bool
}

// CRDsFor returns the CRDs the controller needs for the spec (nil for
// defaults): Required and the SpecCRDs the spec needs.
func (e Entry) CRDsFor(spec *operatorv1alpha1.APIGatewaySpec) []CRD {
	return e.crds(func(c SpecCRD) bool { return c.Needed(spec) })
}

// crds returns Required and the SpecCRDs that keep accepts.
func (e Entry) crds(keep func(SpecCRD) bool) []CRD {
	crds := slices.Clone(e.Required)
	for _, c := range e.SpecCRDs {
		if keep(c) {
			crds = append(crds, c.CRD)
		}
	}
	return crds
}

// SpecReason explains why the spec needs crd, or "" when it is always required.
func (e Entry) SpecReason(crd CRD) string {
	for _, c := range e.SpecCRDs {
		if c.CRD == crd {
			return c.When
		}
	}
	return ""
}

// Catalog is an ordered set of entries.
type Catalog []Entry

// Builtin is the catalog compiled into the operator.
var Builtin = Catalog{
	{
		Controller:              contract.APIRule,
		Description:             "Exposes Services through Istio: APIRules become VirtualServices, AuthorizationPolicies and RequestAuthentications.",
		ProgressDeadlineSeconds: 600,
	},
	{
		Controller:              contract.RateLimit,
		Description:             "Applies local token-bucket rate limits: RateLimits become one EnvoyFilter per Istio gateway workload.",
		ProgressDeadlineSeconds: 600,
	},
	{
		Controller:  contract.Gateway,
		Description: "Runs the default gateway (spec.gateway): an Istio Gateway for *.<domain> with its TLS certificate and a health VirtualService.",
		SpecCRDs: []SpecCRD{{
			CRD:    contract.Certificates,
			When:   "spec.gateway.certificate.certManager is set",
			Needed: func(spec *operatorv1alpha1.APIGatewaySpec) bool { return spec != nil && spec.Gateway.UsesCertManager() },
		}, {
			CRD:    contract.GatewayAPIGateways,
			When:   "spec.gateway.gatewayAPI is set",
			Needed: usesGatewayAPI,
		}, {
			CRD:    contract.HTTPRoutes,
			When:   "spec.gateway.gatewayAPI is set",
			Needed: usesGatewayAPI,
		}},
		ProgressDeadlineSeconds: 600,
	},
	{
		Controller:              contract.RateLimitService,
		Description:             "Enforces RateLimits' global limits: the gRPC rate-limit service the gateways call, counting in Redis; runs only while spec.rateLimits.global is set.",
		ProgressDeadlineSeconds: 600,
		NeedsGlobalRateLimits:   true,
	},
}

// usesGatewayAPI reports whether the spec asks for the default gateway as a
// Gateway API Gateway.
func usesGatewayAPI(spec *operatorv1alpha1.APIGatewaySpec) bool {
	return spec != nil && spec.Gateway.UsesGatewayAPI()
}

// allCRDs are every CRD the entry may need, whatever the spec.
func (e Entry) allCRDs() []CRD {
	return e.crds(func(SpecCRD) bool { return true })
}

// Get returns the entry with the given name.
func (c Catalog) Get(name operatorv1alpha1.ControllerName) (Entry, bool) {
	for _, e := range c {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// WithProgressDeadline returns a copy of the catalog whose Deployments use
// the given progress deadline (rounded up to whole seconds); 0 keeps each
// entry's own.
func (c Catalog) WithProgressDeadline(d time.Duration) Catalog {
	out := slices.Clone(c)
	if d <= 0 {
		return out
	}
	seconds := int32((d + time.Second - 1) / time.Second)
	for i := range out {
		out[i].ProgressDeadlineSeconds = seconds
	}
	return out
}

// CRDNames returns the names of every CRD some entry requires, sorted and
// without duplicates.
func (c Catalog) CRDNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, e := range c {
		for _, crd := range e.allCRDs() {
			if !seen[crd.Name] {
				seen[crd.Name] = true
				names = append(names, crd.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}

var (
	controllerNameRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,30}$`)
	crdNameRE        = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)
	versionRE        = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
)

// Validate reports every problem of the catalog: malformed names, CRDs or
// versions, duplicate entries, unknown dependencies and dependency cycles.
func (c Catalog) Validate() error {
	var errs []error
	names := map[operatorv1alpha1.ControllerName]bool{}
	for _, e := range c {
		if !controllerNameRE.MatchString(string(e.Name)) {
			errs = append(errs, fmt.Errorf("controller %q: name must be lower-case alphanumeric", e.Name))
		}
		if names[e.Name] {
			errs = append(errs, fmt.Errorf("controller %q: listed twice", e.Name))
		}
		names[e.Name] = true
		if len(e.Required) == 0 {
			errs = append(errs, fmt.Errorf("controller %q: requires no CRD; every controller serves at least its own API", e.Name))
		}
		seen := map[string]bool{}
		for _, c := range e.SpecCRDs {
			if c.Needed == nil || c.When == "" {
				errs = append(errs, fmt.Errorf("controller %q: CRD %q: a spec-dependent CRD needs Needed and When", e.Name, c.Name))
			}
		}
		for _, crd := range e.allCRDs() {
			if !crdNameRE.MatchString(crd.Name) || strings.Count(crd.Name, ".") < 2 {
				errs = append(errs, fmt.Errorf("controller %q: CRD name %q is not <plural>.<group>", e.Name, crd.Name))
			}
			if !versionRE.MatchString(crd.Version) {
				errs = append(errs, fmt.Errorf("controller %q: CRD %q: version %q is not a Kubernetes API version", e.Name, crd.Name, crd.Version))
			}
			if seen[crd.Name] {
				errs = append(errs, fmt.Errorf("controller %q: CRD %q required twice", e.Name, crd.Name))
			}
			seen[crd.Name] = true
		}
		if e.ProgressDeadlineSeconds <= 0 {
			errs = append(errs, fmt.Errorf("controller %q: progress deadline must be positive", e.Name))
		}
	}
	for _, e := range c {
		for _, dep := range e.DependsOn {
			if !names[dep] {
				errs = append(errs, fmt.Errorf("controller %q: depends on unknown controller %q", e.Name, dep))
			}
		}
	}
	if len(errs) == 0 {
		if _, err := c.Ordered(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Ordered returns the entries so that every controller comes after the
// controllers it depends on; ties keep catalog order. It fails on a cycle,
// naming the controllers in it.
func (c Catalog) Ordered() (Catalog, error) {
	index := map[operatorv1alpha1.ControllerName]int{}
	for i, e := range c {
		index[e.Name] = i
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]int, len(c))
	ordered := make(Catalog, 0, len(c))
	var visit func(i int, path []operatorv1alpha1.ControllerName) error
	visit = func(i int, path []operatorv1alpha1.ControllerName) error {
		switch state[i] {
		case done:
			return nil
		case visiting:
			cycle := append(path, c[i].Name)
			parts := make([]string, len(cycle))
			for k, n := range cycle {
				parts[k] = string(n)
			}
			return fmt.Errorf("dependency cycle: %s", strings.Join(parts, " -> "))
		}
		state[i] = visiting
		for _, dep := range c[i].DependsOn {
			j, ok := index[dep]
			if !ok {
				continue // reported by Validate
			}
			if err := visit(j, append(path, c[i].Name)); err != nil {
				return err
			}
		}
		state[i] = done
		ordered = append(ordered, c[i])
		return nil
	}
	for i := range c {
		if err := visit(i, nil); err != nil {
			return nil, err
		}
	}
	return ordered, nil
}
