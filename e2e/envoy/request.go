package envoy

import (
	"net/http"
	"net/netip"
	"strings"
)

// Request is what Envoy's router and HTTP filters read of a request.
type Request struct {
	// Host is the :authority, Path the path without the query, Method
	// the :method.
	Host, Path, Method string
	// Query is the request's query string, without "?".
	Query string
	// Headers by name (any case); a header sent several times is one
	// value joined by ",", as Envoy's matchers see it.
	Headers map[string]string
}

// FromHTTP is the Request Envoy would see for r.
func FromHTTP(r *http.Request) Request {
	out := Request{Host: r.Host, Path: r.URL.Path, Method: r.Method, Query: r.URL.RawQuery, Headers: map[string]string{}}
	for name, values := range r.Header {
		out.Headers[strings.ToLower(name)] = strings.Join(values, ",")
	}
	return out
}

// Header returns a request header as Envoy's matchers see it: pseudo
// headers for host, method and path (with the query), others by name
// regardless of case.
func (r Request) Header(name string) (string, bool) {
	switch strings.ToLower(name) {
	case ":authority", "host":
		return r.Host, true
	case ":method":
		return r.Method, true
	case ":path":
		if r.Query != "" {
			return r.Path + "?" + r.Query, true
		}
		return r.Path, true
	}
	if v, ok := r.Headers[name]; ok {
		return v, true
	}
	for k, v := range r.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// Downstream is what a sidecar knows of the connection a request came on.
type Downstream struct {
	// Port is the destination port the request was sent to.
	Port int
	// Principal is the peer's SPIFFE identity, with its scheme; "" when
	// the connection is not mutual TLS.
	Principal string
	// DirectIP is the peer's address, RemoteIP the client's (after
	// X-Forwarded-For and trusted hops).
	DirectIP, RemoteIP netip.Addr
}

// Metadata is a request's dynamic metadata: filter name, then its struct.
type Metadata map[string]map[string]any

// set stores a value of a filter's struct.
func (m Metadata) set(filter, key string, value any) {
	if m[filter] == nil {
		m[filter] = map[string]any{}
	}
	m[filter][key] = value
}
