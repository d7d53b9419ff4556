// Package certs issues, inspects and checks the TLS certificates of the
// default gateway, which serves *.<domain> over HTTPS.
//
// The gateway controller has two certificate sources:
//
//   - selfSigned: the controller keeps a CA of its own for the cluster and a
//     wildcard serving certificate for *.<domain> (and <domain>) signed by
//     it. Plan decides what to reissue, Apply carries the decision out, and
//     the CA certificate (the CertPEM of the CA Pair, never its key) is
//     published for clients to trust.
//   - secretName: a user's kubernetes.io/tls Secret. Check says whether it
//     can serve the domain now; nothing here ever changes it.
//
// Invariants:
//
//   - Every decision is a pure function of its arguments: the clock is a
//     now parameter, nothing reads the wall clock, the network or the API
//     server. Only new keys and serial numbers come from crypto/rand.
//   - Keys are ECDSA P-256 (PKCS #8 "PRIVATE KEY" PEM); serial numbers are
//     random, positive and at most 128 bits.
//   - Certificates start one hour before now (clock skew between the
//     controller and clients) and their dates have whole seconds, as X.509
//     stores them, so what Plan predicts is what Apply issues.
//   - The CA is valid ten times as long as the serving certificate, has
//     common name "portico-gateway-ca <domain>" and can sign end-entity
//     certificates only (path length zero). The serving certificate never
//     outlives its CA, and its CertPEM is the leaf followed by the CA.
//   - A certificate is renewed when two thirds of its lifetime (NotBefore to
//     NotAfter) have passed (RenewAt). A new CA always comes with a new
//     serving certificate, and the serving certificate Plan accepts is
//     always one the current CA verifies for the domain: a client trusting
//     the published CA accepts it for <domain> and any one-label name under
//     it, never for deeper names or other domains.
//   - Domains are compared lower-case without a trailing dot.
//   - Errors are sentences a status message can carry as they are, with
//     dates in RFC 3339 (UTC).
package certs
