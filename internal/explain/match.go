package explain

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// matchString applies Istio's string match of authorization policies:
// "*" is a presence match (any non-empty value), "abc*" a prefix, "*abc" a
// suffix, anything else exact.
func matchString(pattern, value string) bool {
	switch {
	case pattern == "*":
		return value != ""
	case strings.HasSuffix(pattern, "*"):
		return strings.HasPrefix(value, strings.TrimSuffix(pattern, "*"))
	case strings.HasPrefix(pattern, "*"):
		return strings.HasSuffix(value, strings.TrimPrefix(pattern, "*"))
	}
	return pattern == value
}

// anyString reports whether a pattern matches a value.
func anyString(patterns []string, values ...string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if matchString(p, v) {
				return true
			}
		}
	}
	return false
}

// field is one positive/negative pair of a Source or Operation: the request
// must match a value of the list (when set) and none of the negative list.
// An absent attribute matches no positive value and no negative one.
func field(values, notValues []string, attr ...string) bool {
	if len(values) > 0 && !anyString(values, attr...) {
		return false
	}
	return len(notValues) == 0 || !anyString(notValues, attr...)
}

// checkPaths rejects the paths the judge does not model: a path with '{'
// or '}' that is not one of Istio's path templates ("{*}" and "{**}" as
// whole segments, "{**}" as the last operator, no other '*').
func checkPaths(paths []string) error {
	for _, p := range paths {
		if strings.ContainsAny(p, "{}") {
			if _, err := templateRegexp(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// templateRegexp is an Istio path template as Envoy's URI template
// matcher reads it: "{*}" one or more path characters other than '/',
// "{**}" any path characters including '/', none included.
func templateRegexp(p string) (*regexp.Regexp, error) {
	const pathChars = `-a-zA-Z0-9._~%!$&'()+,;:@=`
	segments := strings.Split(p, "/")
	var b strings.Builder
	for i, seg := range segments {
		if i > 0 {
			b.WriteString("/")
		}
		switch {
		case seg == "{*}":
			b.WriteString("[" + pathChars + "]+")
		case seg == "{**}" && i == len(segments)-1:
			b.WriteString("[" + pathChars + "/]*")
		case strings.ContainsAny(seg, "{}*"):
			return nil, fmt.Errorf("path template %q is not modelled", p)
		default:
			b.WriteString(regexp.QuoteMeta(seg))
		}
	}
	return regexp.MustCompile("^" + b.String() + "$"), nil
}

// matchPath applies an authorization policy's path match: a template, or
// matchString's exact, prefix, suffix and presence matches.
func matchPath(patterns []string, path string) bool {
	for _, p := range patterns {
		if strings.ContainsAny(p, "{}") {
			if re, err := templateRegexp(p); err == nil && re.MatchString(path) {
				return true
			}
			continue
		}
		if matchString(p, path) {
			return true
		}
	}
	return false
}

// matchHost compares hosts case-insensitively, with the same wildcards.
func matchHost(patterns []string, host string) bool {
	lower := make([]string, len(patterns))
	for i, p := range patterns {
		lower[i] = strings.ToLower(p)
	}
	return anyString(lower, strings.ToLower(host))
}

// matchPorts compares a port with a list of port numbers.
func matchPorts(ports []string, port int) (bool, error) {
	for _, p := range ports {
		n, err := strconv.Atoi(p)
		if err != nil {
			return false, fmt.Errorf("port %q is not a number", p)
		}
		if n == port {
			return true, nil
		}
	}
	return false, nil
}

// matchCIDRs reports whether an address is in one of the blocks (an IP or
// a CIDR each). An invalid address (unknown) matches none.
func matchCIDRs(blocks []string, addr netip.Addr) (bool, error) {
	for _, b := range blocks {
		prefix, err := netip.ParsePrefix(b)
		if err != nil {
			ip, ipErr := netip.ParseAddr(b)
			if ipErr != nil {
				return false, fmt.Errorf("ip block %q is neither an address nor a CIDR", b)
			}
			prefix = netip.PrefixFrom(ip, ip.BitLen())
		}
		if addr.IsValid() && prefix.Contains(addr) {
			return true, nil
		}
	}
	return false, nil
}

// ipField is field for address blocks.
func ipField(blocks, notBlocks []string, addr netip.Addr) (bool, error) {
	in, err := matchCIDRs(blocks, addr)
	if err != nil {
		return false, err
	}
	out, err := matchCIDRs(notBlocks, addr)
	if err != nil {
		return false, err
	}
	return (len(blocks) == 0 || in) && !out, nil
}

// selects reports whether a workload selector matches labels; an empty
// selector selects every workload.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// nonEmpty drops empty strings, so that an absent attribute is no value.
func nonEmpty(values ...string) []string {
	return slices.DeleteFunc(values, func(s string) bool { return s == "" })
}
