package explain

import (
	"fmt"
	"strconv"
	"strings"

	securityv1beta1 "istio.io/api/security/v1beta1"
)

// ruleMatches applies one rule: every from, to and when part that is set
// must match (AND); within from and to, one entry suffices (OR).
func ruleMatches(rule *securityv1beta1.Rule, r Request, id identity) (bool, error) {
	if rule == nil {
		return false, nil
	}
	if len(rule.From) > 0 {
		ok, err := anyOf(rule.From, func(f *securityv1beta1.Rule_From) (bool, error) { return sourceMatches(f.GetSource(), r, id) })
		if err != nil || !ok {
			return false, err
		}
	}
	if len(rule.To) > 0 {
		ok, err := anyOf(rule.To, func(t *securityv1beta1.Rule_To) (bool, error) { return operationMatches(t.GetOperation(), r) })
		if err != nil || !ok {
			return false, err
		}
	}
	for _, c := range rule.When {
		ok, err := conditionMatches(c, r, id)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func anyOf[T any](items []T, match func(T) (bool, error)) (bool, error) {
	for _, item := range items {
		ok, err := match(item)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// sourceMatches ANDs the fields of a source.
func sourceMatches(s *securityv1beta1.Source, r Request, id identity) (bool, error) {
	if s == nil {
		return true, nil
	}
	trustDomain, namespace, serviceAccount := r.From.parts()
	ok := field(s.Principals, s.NotPrincipals, nonEmpty(r.From.Principal)...) &&
		field(s.RequestPrincipals, s.NotRequestPrincipals, nonEmpty(id.principal())...) &&
		field(s.Namespaces, s.NotNamespaces, nonEmpty(namespace)...) &&
		field(s.ServiceAccounts, s.NotServiceAccounts, nonEmpty(namespace+"/"+serviceAccount)...) &&
		field(s.TrustDomains, s.NotTrustDomains, nonEmpty(trustDomain)...)
	if !ok {
		return false, nil
	}
	if ok, err := ipField(s.IpBlocks, s.NotIpBlocks, r.From.IP); err != nil || !ok {
		return false, err
	}
	return ipField(s.RemoteIpBlocks, s.NotRemoteIpBlocks, r.From.RemoteIP)
}

// operationMatches ANDs the fields of an operation.
func operationMatches(o *securityv1beta1.Operation, r Request) (bool, error) {
	if o == nil {
		return true, nil
	}
	if err := checkPaths(append(append([]string{}, o.Paths...), o.NotPaths...)); err != nil {
		return false, err
	}
	if len(o.Hosts) > 0 && !matchHost(o.Hosts, r.Host) || len(o.NotHosts) > 0 && matchHost(o.NotHosts, r.Host) {
		return false, nil
	}
	in, err := matchPorts(o.Ports, r.Port)
	if err != nil || len(o.Ports) > 0 && !in {
		return false, err
	}
	out, err := matchPorts(o.NotPorts, r.Port)
	if err != nil || out {
		return false, err
	}
	if r.Path != "" && (len(o.Paths) > 0 && !matchPath(o.Paths, r.Path) || len(o.NotPaths) > 0 && matchPath(o.NotPaths, r.Path)) ||
		r.Path == "" && len(o.Paths) > 0 {
		return false, nil
	}
	return field(o.Methods, o.NotMethods, nonEmpty(r.Method)...), nil
}

// conditionMatches applies a when condition: some value matches (when
// values are set) and no notValue does. An attribute with several values
// (a list claim) matches if any of them does.
func conditionMatches(c *securityv1beta1.Condition, r Request, id identity) (bool, error) {
	key := c.GetKey()
	if key == "source.ip" || key == "remote.ip" {
		addr := r.From.IP
		if key == "remote.ip" {
			addr = r.From.RemoteIP
		}
		return ipField(c.Values, c.NotValues, addr)
	}
	attr, err := attribute(key, r, id)
	if err != nil {
		return false, err
	}
	return field(c.Values, c.NotValues, nonEmpty(attr...)...), nil
}

// attribute returns the values of a condition key for the request.
func attribute(key string, r Request, id identity) ([]string, error) {
	_, namespace, serviceAccount := r.From.parts()
	switch key {
	case "request.auth.principal":
		return []string{id.principal()}, nil
	case "request.auth.audiences":
		return id.claim("aud"), nil
	case "request.auth.presenter":
		return id.claim("azp"), nil
	case "source.principal":
		return []string{r.From.Principal}, nil
	case "source.namespace":
		return []string{namespace}, nil
	case "source.serviceAccount":
		return []string{namespace + "/" + serviceAccount}, nil
	case "destination.port":
		return []string{strconv.Itoa(r.Port)}, nil
	}
	if name, ok := bracketed(key, "request.auth.claims"); ok {
		if strings.Contains(name, "][") {
			return nil, fmt.Errorf("nested claim %q is not modelled", key)
		}
		return id.claim(name), nil
	}
	if name, ok := bracketed(key, "request.headers"); ok {
		for k, v := range r.Headers {
			if strings.EqualFold(k, name) {
				return []string{v}, nil
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("condition key %q is not modelled", key)
}

// bracketed returns x of "<prefix>[x]".
func bracketed(key, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return "", false
	}
	return strings.TrimSuffix(rest, "]"), true
}
