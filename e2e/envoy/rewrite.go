package envoy

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	uritemplaterewritev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/path/rewrite/uri_template/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

var backReference = regexp.MustCompile(`\\(\d)`)

// regexRewrite is Envoy's regex_rewrite: every match of the pattern in the
// path is replaced by the substitution, where \N is the N-th group.
func regexRewrite(r *matcherv3.RegexMatchAndSubstitute, path string) (string, error) {
	re, err := compile(r.GetPattern().GetRegex(), false)
	if err != nil {
		return "", err
	}
	return re.ReplaceAllString(path, backReference.ReplaceAllString(r.GetSubstitution(), `$${$1}`)), nil
}

// prefixRewrite replaces what the route matched: the prefix of a prefix
// or path-separated-prefix match, the whole path of any other.
func prefixRewrite(m *routev3.RouteMatch, rewrite, path string) string {
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		return rewrite + path[min(len(ps.Prefix), len(path)):]
	case *routev3.RouteMatch_PathSeparatedPrefix:
		return rewrite + path[min(len(ps.PathSeparatedPrefix), len(path)):]
	}
	return rewrite
}

// RewritePath is the path (without the query) a forwarding route sends
// upstream: after its regex_rewrite, path_rewrite_policy (uri_template) or
// prefix_rewrite; the path itself without one.
func RewritePath(rt *routev3.Route, path string) (string, error) {
	a := rt.GetRoute()
	switch {
	case a.GetRegexRewrite() != nil:
		return regexRewrite(a.GetRegexRewrite(), path)
	case a.GetPathRewritePolicy() != nil:
		cfg := &uritemplaterewritev3.UriTemplateRewriteConfig{}
		if err := a.GetPathRewritePolicy().GetTypedConfig().UnmarshalTo(cfg); err != nil {
			return "", fmt.Errorf("path rewrite policy %s: %w", a.GetPathRewritePolicy().GetName(), err)
		}
		if rt.GetMatch().GetPathMatchPolicy() == nil {
			return "", fmt.Errorf("route %q: a uri_template rewrite needs a uri_template match", rt.GetName())
		}
		template, err := matchTemplate(rt.GetMatch())
		if err != nil {
			return "", err
		}
		return URITemplateRewrite(template, cfg.GetPathTemplateRewrite(), path)
	case a.GetPrefixRewrite() != "":
		return prefixRewrite(rt.GetMatch(), a.GetPrefixRewrite(), path), nil
	}
	return path, nil
}

// RewriteHost is the Host a forwarding route sends upstream: its
// host_rewrite_literal, else the request's. Other host rewrites are not
// modelled.
func RewriteHost(rt *routev3.Route, host string) (string, error) {
	a := rt.GetRoute()
	switch hr := a.GetHostRewriteSpecifier().(type) {
	case nil:
		return host, nil
	case *routev3.RouteAction_HostRewriteLiteral:
		return hr.HostRewriteLiteral, nil
	}
	return "", fmt.Errorf("route %q: host rewrite %T is not modelled", rt.GetName(), a.GetHostRewriteSpecifier())
}

// redirectCodes are the statuses of RedirectAction's response codes.
var redirectCodes = map[routev3.RedirectAction_RedirectResponseCode]int{
	routev3.RedirectAction_MOVED_PERMANENTLY:  301,
	routev3.RedirectAction_FOUND:              302,
	routev3.RedirectAction_SEE_OTHER:          303,
	routev3.RedirectAction_TEMPORARY_REDIRECT: 307,
	routev3.RedirectAction_PERMANENT_REDIRECT: 308,
}

// Redirect is the status and Location of a redirecting route for a
// request that arrived with scheme (http or https): each part the redirect
// does not replace is the request's; a scheme change drops a port the
// redirect does not set, and the default port of the scheme is left out.
func Redirect(rt *routev3.Route, scheme string, r Request) (int, string, error) {
	rd := rt.GetRedirect()
	if rd == nil {
		return 0, "", fmt.Errorf("route %q does not redirect", rt.GetName())
	}
	status, ok := redirectCodes[rd.GetResponseCode()]
	if !ok {
		return 0, "", fmt.Errorf("route %q: response code %v is not modelled", rt.GetName(), rd.GetResponseCode())
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	switch s := rd.GetSchemeRewriteSpecifier().(type) {
	case *routev3.RedirectAction_HttpsRedirect:
		if s.HttpsRedirect && scheme != "https" {
			scheme, port = "https", ""
		}
	case *routev3.RedirectAction_SchemeRedirect:
		if s.SchemeRedirect != scheme {
			scheme, port = s.SchemeRedirect, ""
		}
	}
	if rd.GetHostRedirect() != "" {
		host = rd.GetHostRedirect()
	}
	if rd.GetPortRedirect() != 0 {
		port = strconv.Itoa(int(rd.GetPortRedirect()))
	}
	if port == "80" && scheme == "http" || port == "443" && scheme == "https" {
		port = ""
	}
	path, query := r.Path, r.Query
	switch p := rd.GetPathRewriteSpecifier().(type) {
	case *routev3.RedirectAction_PathRedirect:
		path, query, _ = strings.Cut(p.PathRedirect, "?")
		if !strings.Contains(p.PathRedirect, "?") {
			query = r.Query
		}
	case *routev3.RedirectAction_PrefixRewrite:
		path = prefixRewrite(rt.GetMatch(), p.PrefixRewrite, path)
	case *routev3.RedirectAction_RegexRewrite:
		if path, err = regexRewrite(p.RegexRewrite, path); err != nil {
			return 0, "", err
		}
	}
	if rd.GetStripQuery() {
		query = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	}
	u := url.URL{Scheme: scheme, Host: host, Path: path, RawQuery: query}
	return status, u.String(), nil
}
