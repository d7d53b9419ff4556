package v1alpha1

// Controller returns the spec.controllers entry of the named controller, or
// the defaults of a controller that is not listed (only its name set).
func (s *APIGatewaySpec) Controller(name ControllerName) ControllerSpec {
	for _, c := range s.Controllers {
		if c.Name == name {
			return c
		}
	}
	return ControllerSpec{Name: name}
}

// IsEnabled reports whether the controller runs (when its CRDs allow):
// enabled unset means true, as the API server defaults it.
func (c ControllerSpec) IsEnabled() bool {
	return c.Enabled == nil || *c.Enabled
}

// ControllerEnabled reports whether the spec runs the named controller: a
// listed controller unless enabled is false, and every controller that is not
// listed (its defaults enable it). This is the one place that decides it, for
// the operator (Deployments, status, preflight) and for a controller deciding
// whether to retire itself.
func (s *APIGatewaySpec) ControllerEnabled(name ControllerName) bool {
	return s.Controller(name).IsEnabled()
}
