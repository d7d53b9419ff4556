// Package tokencheck reads a JSON Web Token the way `portico explain` needs
// it: it decodes the token's header and claims without verifying its
// signature (Decode), and says whether those claims satisfy what an
// APIRule's jwt access demands (Check): an issuer it trusts, then one of its
// alternatives (all of its scopes, one of its audiences), as Istio evaluates
// the AuthorizationPolicies Portico renders (claims iss, aud and scope; a
// space-separated scope string is a list). Expiry and not-before are checked
// against the clock the caller passes, with Envoy's 60 s clock skew.
//
// Verify checks the signature with a key set the caller fetched (RS256/384/512,
// ES256/384/512). It is pure: it reads no cluster and fetches nothing, so
// the caller says whether the issuer's JWKS was reachable; Check's Result
// never claims the signature was checked.
package tokencheck
