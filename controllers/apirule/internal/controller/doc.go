// Package controller reconciles APIRules: for each it checks the Services
// (and, when Istio's Gateway CRD is installed, the Gateway) it references,
// translates it, and server-side applies the VirtualService,
// AuthorizationPolicy and, with JWT rules, RequestAuthentication, deleting
// the RequestAuthentication once no rule needs it. It watches the objects it
// owns and re-applies on drift or deletion, and reports a Ready condition.
//
// A problem with the APIRule or what it references is reported in status
// and leaves the live Istio objects as they were.
package controller
