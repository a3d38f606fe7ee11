package extauthz

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/verdict"
)

// contentType is the Content-Type of every body this front has Envoy send.
const contentType = "text/plain; charset=utf-8"

// response answers v: OK with the RateLimit headers for the upstream's response, a 429
// denied_response when a policy denied, or a 400 one when the request cannot be judged.
func response(v *verdict.Verdict) *authv3.CheckResponse {
	switch v.Kind {
	case verdict.Admitted:
		return &authv3.CheckResponse{
			Status:       status.New(codes.OK, "").Proto(),
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{ResponseHeadersToAdd: headerOptions(v.Fields)}},
		}
	case verdict.Denied:
		return denied(codes.PermissionDenied, typev3.StatusCode_TooManyRequests, v.Fields, v.Message)
	}
	// the text may quote the caller's path: invalid UTF-8 (which a proto string cannot carry)
	// is replaced
	return denied(codes.InvalidArgument, typev3.StatusCode_BadRequest, nil, strings.ToValidUTF8(v.Message, "\uFFFD"))
}

// denied is a denied_response with HTTP status code and a text/plain body of one line,
// reason; fields are set before the Content-Type.
func denied(c codes.Code, code typev3.StatusCode, fields []ratelimitheaders.Field, reason string) *authv3.CheckResponse {
	fields = append(fields, ratelimitheaders.Field{Name: "Content-Type", Value: contentType})
	return &authv3.CheckResponse{
		Status: status.New(c, "").Proto(),
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: code},
			Headers: headerOptions(fields),
			Body:    reason + "\n",
		}},
	}
}

// headerOptions converts header fields to Envoy's form, each one overwriting any value of
// the same name (the upstream's own RateLimit headers, on an admitted request). Envoy reads
// an unset append as false (overwrite) in these messages, and newer Envoys read append_action:
// both say overwrite.
func headerOptions(fields []ratelimitheaders.Field) []*corev3.HeaderValueOption {
	if len(fields) == 0 {
		return nil
	}
	out := make([]*corev3.HeaderValueOption, len(fields))
	opts := make([]corev3.HeaderValueOption, len(fields)) // one allocation for all
	values := make([]corev3.HeaderValue, len(fields))
	for i, f := range fields {
		values[i].Key, values[i].Value = f.Name, f.Value
		opts[i].Header = &values[i]
		opts[i].AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		out[i] = &opts[i]
	}
	return out
}
