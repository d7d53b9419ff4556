// Package paths reads the path patterns of APIRule rules and of Istio's
// AuthorizationPolicies: exact paths, prefixes ("/orders/*"), and templates
// ("{*}" one segment, a final "{**}" the rest). It says whether two patterns
// can match a common path (Meet, PatternsMeet), ranks them as routes are
// tried (Rank) and writes a template as the regular expression a route
// matches (Regex). It knows nothing of rules, access or output objects.
package paths
