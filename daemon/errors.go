package daemon

import (
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/picometer/picometer/schema"
)

// This file: openai_test.go and server_test.go cover it (every error shape
// and status, exact JSON).

// OpenAI error types (error.type in the response body).
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeNotFound       = "not_found_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
)

// apiError is one failed request: the HTTP status, the OpenAI-shaped error
// object, and the schema error type its request event carries.
//
// Statuses and shapes (documented in the README by the lead):
//
//	400 invalid_request_error  malformed JSON, wrong types, out-of-range values, n ≠ 1,
//	                           logprobs, unsupported parameters, prompt too long
//	401 authentication_error   code invalid_api_key
//	404 not_found_error        unknown route (code unknown_url) or model (code model_not_found)
//	405 invalid_request_error  code method_not_allowed, with an Allow header
//	413 invalid_request_error  code payload_too_large
//	429 rate_limit_error       code queue_full: the engine's waiting queue is full
//	500 server_error           code engine_error
//	503 server_error           code shutting_down
//	504 server_error           code timeout: the request's deadline passed
type apiError struct {
	Status  int
	Type    string // OpenAI error.type
	Code    string // OpenAI error.code; "" is null
	Param   string // OpenAI error.param; "" is null
	Message string
	Kind    string // schema error type (schema.Err*) for the request event
	// Constraint is the kind of output constraint the error refused
	// (schema.Constraint*), for the request event's rejected outcome; ""
	// for any other error.
	Constraint string
}

func (e *apiError) Error() string { return e.Message }

// appendJSON appends the OpenAI error object {"error":{…}}.
func (e *apiError) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendJSONString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, e.Type)
	dst = append(dst, `,"param":`...)
	dst = appendJSONNullString(dst, e.Param)
	dst = append(dst, `,"code":`...)
	dst = appendJSONNullString(dst, e.Code)
	return append(dst, "}}"...)
}

// write sends e as the whole response.
func (e *apiError) write(ctx *fasthttp.RequestCtx) {
	ctx.Response.Reset()
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	if e.Status == fasthttp.StatusTooManyRequests {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	if e.Status == fasthttp.StatusUnauthorized {
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
	}
	ctx.SetBody(e.appendJSON(nil))
}

func badRequest(param, code, format string, args ...any) *apiError {
	return &apiError{Status: fasthttp.StatusBadRequest, Type: typeInvalidRequest, Code: code, Param: param,
		Message: fmt.Sprintf(format, args...), Kind: schema.ErrInvalidRequest}
}

func errUnknownRoute(method, path []byte) *apiError {
	return &apiError{Status: fasthttp.StatusNotFound, Type: typeNotFound, Code: "unknown_url",
		Message: fmt.Sprintf("Invalid URL (%s %s)", method, path), Kind: schema.ErrNotFound}
}

// errResponseNotFound answers GET (or DELETE, or cancel) of a stored
// response: picometer stores none.
func errResponseNotFound(id string) *apiError {
	return &apiError{Status: fasthttp.StatusNotFound, Type: typeNotFound, Code: "response_not_found",
		Message: fmt.Sprintf("Response with id %s not found: this server stores no responses (every response is answered with store false).", strconv.Quote(id)),
		Kind:    schema.ErrNotFound}
}

func errModelNotFound(asked, served string) *apiError {
	return &apiError{Status: fasthttp.StatusNotFound, Type: typeNotFound, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model %s does not exist; this server serves %s.", strconv.Quote(asked), strconv.Quote(served)),
		Kind:    schema.ErrNotFound}
}

func errMethod(method []byte, allow string) *apiError {
	return &apiError{Status: fasthttp.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: "method_not_allowed",
		Message: fmt.Sprintf("Method %s is not allowed here; use %s.", method, allow), Kind: schema.ErrMethodNotAllowed}
}

func errTooLarge(limit int) *apiError {
	return &apiError{Status: fasthttp.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "payload_too_large",
		Message: fmt.Sprintf("The request body is larger than the limit of %d bytes.", limit), Kind: schema.ErrPayloadTooLarge}
}

var (
	errMissingKey = &apiError{Status: fasthttp.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
		Message: "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY).",
		Kind:    schema.ErrUnauthorized}
	errWrongKey = &apiError{Status: fasthttp.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
		Message: "Incorrect API key provided.", Kind: schema.ErrUnauthorized}
	errQueueFull = &apiError{Status: fasthttp.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_full",
		Message: "The server's waiting queue is full; retry later.", Kind: schema.ErrQueueFull}
	errShuttingDown = &apiError{Status: fasthttp.StatusServiceUnavailable, Type: typeServer, Code: "shutting_down",
		Message: "The server is shutting down.", Kind: schema.ErrShutdown}
	errCancelled = &apiError{Status: 499, Type: typeServer, Code: "cancelled",
		Message: "The request was cancelled.", Kind: schema.ErrCancelled}
)

func errEngine(err error) *apiError {
	return &apiError{Status: fasthttp.StatusInternalServerError, Type: typeServer, Code: "engine_error",
		Message: "The engine failed: " + err.Error(), Kind: schema.ErrEngine}
}

func errTimeout(d string, tokens int) *apiError {
	return &apiError{Status: fasthttp.StatusGatewayTimeout, Type: typeServer, Code: "timeout",
		Message: fmt.Sprintf("The request exceeded its deadline of %s after %d output tokens.", d, tokens), Kind: schema.ErrTimeout}
}

func errInternal(msg string) *apiError {
	return &apiError{Status: fasthttp.StatusInternalServerError, Type: typeServer, Code: "internal_error",
		Message: msg, Kind: schema.ErrOther}
}
