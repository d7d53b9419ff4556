// Package apiclient bounds what a Portico process asks of the API server:
// how many requests a second it sends (one token bucket shared by every
// client built from the process's rest.Config, so the bound is the
// process's, not each resource type's) and how long one request may take.
//
// The time bound applies to requests that end (get, list, create, update,
// patch, delete, discovery), never to watches: rest.Config.Timeout would
// become the HTTP client's timeout and cut every watch after that long, so
// the bound is a deadline a RoundTripper puts on each request whose query
// does not ask for a watch, held until its response body is closed.
//
// The operator and every controller take the same three flags
// (internal/contract names them and their defaults); leader election keeps
// a configuration without these bounds, so bulk work can never delay the
// renewal of a Lease. The package knows nothing of controllers and parses
// no flags: it turns the three values into a rest.Config.
package apiclient
