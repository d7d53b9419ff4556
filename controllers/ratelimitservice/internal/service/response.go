package service

import (
	"math"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/metrics"
	"github.com/portico-dev/portico/controllers/ratelimitservice/internal/store"
	"github.com/portico-dev/portico/internal/globallimit"
)

// Decision is one descriptor's outcome.
type Decision struct {
	// ID is the descriptor's limit id.
	ID string
	// Limit is the tenant's limit of ID, nil when unknown.
	Limit *globallimit.Limit
	// Result is the store's answer for Limit.
	Result store.Result
	// request indexes the store request of Limit.
	request int
}

// Code is the decision's metric code.
func (d Decision) Code() metrics.Code {
	switch {
	case d.Limit == nil:
		return metrics.UnknownLimit
	case !d.Result.Over:
		return metrics.OK
	case d.Limit.Shadow:
		return metrics.ShadowOverLimit
	}
	return metrics.OverLimit
}

// Response maps decisions to Envoy's answer: OVER_LIMIT overall when any
// decision of a limit that is not a shadow limit is over.
func Response(decisions []Decision) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(decisions)),
	}
	for i, d := range decisions {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses[i] = st
		if d.Limit == nil {
			continue
		}
		if d.Code() == metrics.OverLimit {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if !d.Limit.Headers {
			// The gateway writes X-RateLimit-* headers from these figures:
			// only for RateLimits that ask for them (responseHeaders).
			continue
		}
		st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{
			Name:            d.ID,
			RequestsPerUnit: clampUint32(d.Limit.Requests),
			Unit:            unit(d.Limit.Unit),
		}
		st.LimitRemaining = clampUint32(d.Result.Remaining)
		st.DurationUntilReset = durationpb.New(d.Result.Reset)
	}
	return resp
}

func clampUint32(n int64) uint32 {
	return uint32(max(0, min(n, math.MaxUint32)))
}

func unit(u globallimit.Unit) rlsv3.RateLimitResponse_RateLimit_Unit {
	switch u {
	case globallimit.Second:
		return rlsv3.RateLimitResponse_RateLimit_SECOND
	case globallimit.Minute:
		return rlsv3.RateLimitResponse_RateLimit_MINUTE
	case globallimit.Hour:
		return rlsv3.RateLimitResponse_RateLimit_HOUR
	case globallimit.Day:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}
