// Package kinds describes, once each, the kinds of objects Portico's
// controllers write (Istio's, the Gateway API's, ConfigMaps) for the write
// path of package owned: how to make, list, compare and copy the spec of
// each. A controller's owned.Table lists the kinds it writes.
package kinds
