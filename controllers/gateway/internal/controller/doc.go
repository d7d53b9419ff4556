// Package controller runs the default gateway of the APIGateway
// (spec.gateway): an Istio Gateway portico-gateway serving *.<domain> over
// HTTPS with HTTP redirected, a health VirtualService answering at
// https://healthz.<domain>/healthz/ready, and the certificate from one of
// three sources (selfSigned, certManager, secretName).
//
// Invariants:
//   - It writes only objects it created: each carries a controller
//     reference to the APIGateway. A same-named object without one is
//     reported (ObjectNotOwned) and never touched; the user's secretName
//     Secret is only read.
//   - Each certificate source delivers into its own Secret, and the Gateway
//     moves to a source's Secret only once that holds a certificate valid
//     for *.<domain>; until then it keeps the one it serves. Switching
//     sources leaves no window without a valid certificate.
//   - A disabled gateway, or one left in a namespace spec.gateway no longer
//     names, is removed only once no APIRule uses it; until then the status
//     is Warning (GatewayInUse) and names them.
//   - It may not list Secrets: its ClusterRole allows get and writes only
//     for the names it writes (and a secretName the chart value
//     controllers.gateway.secretNames lists), so it re-reads them by name
//     every Resync.
//   - status.gateway is the only part of the APIGateway it writes.
package controller
