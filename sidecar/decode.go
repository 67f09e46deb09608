package sidecar

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/picometer/picometer/schema"
)

// MaxLabelBytes bounds the free-form values a hello carries into labels
// (model, engine, daemon version): they become Prometheus label values and
// OTel attributes on every series of the daemon.
const MaxLabelBytes = 256

// decodeLine decodes one NDJSON line (without its newline) into ev, which is
// reset and reused, and validates it: [schema.Decode] does the wire format,
// decodeLine adds what the sidecar needs of a hello (its model, engine and
// version become label values). It never panics. The error, if any, is a
// *schema.DecodeError whose Reason is one of schema.DecodeReasons.
func decodeLine(line []byte, ev *schema.Event) error {
	var d lineDecoder
	return d.decode(line, ev)
}

// lineDecoder is decodeLine with a connection's state: request lines in the
// daemons' own form take the fast path of decode_request.go, with the same
// result as schema.Decode. What it decodes into ev is valid until its next
// decode (the request id is in the decoder's buffer, the slices are ev's).
type lineDecoder struct {
	req requestDecoder
}

func (d *lineDecoder) decode(line []byte, ev *schema.Event) error {
	var err error
	if d.req.decode(line, ev) {
		err = ev.Validate()
	} else {
		err = schema.Decode(line, ev)
	}
	if err != nil {
		return err
	}
	switch ev.Kind {
	case schema.KindHello:
		return checkHello(&ev.HelloBody)
	case schema.KindRequest:
		return checkRequest(&ev.RequestBody)
	}
	return nil
}

// checkRequest adds the ordering schema.Decode leaves open: the first token
// cannot come before admission (the prefill phase would be negative).
func checkRequest(r *schema.RequestBody) error {
	if r.AdmittedUS >= 0 && r.FirstTokenUS >= 0 && r.FirstTokenUS < r.AdmittedUS {
		return invalidField("first_token_us: %d before admitted_us %d", r.FirstTokenUS, r.AdmittedUS)
	}
	return nil
}

func checkHello(h *schema.HelloBody) error {
	for _, f := range []struct{ key, v string }{{"model", h.Model}, {"engine", h.Engine}, {"daemon", h.Daemon}} {
		switch {
		case f.v == "":
			return invalidField("%s: missing", f.key)
		case len(f.v) > MaxLabelBytes:
			return invalidField("%s: %d bytes, more than %d", f.key, len(f.v), MaxLabelBytes)
		case !utf8.ValidString(f.v):
			return invalidField("%s: %q is not valid UTF-8", f.key, f.v)
		case strings.IndexFunc(f.v, unicode.IsControl) >= 0:
			return invalidField("%s: %q contains a control character", f.key, f.v)
		}
	}
	return nil
}

func invalidField(format string, args ...any) *schema.DecodeError {
	return &schema.DecodeError{Reason: schema.ReasonInvalidField, Msg: fmt.Sprintf(format, args...)}
}

// closesConnection reports whether a line rejected for reason ends its
// connection: the rest of an unversioned or unframed stream cannot be trusted.
func closesConnection(reason string) bool {
	return reason == schema.ReasonUnsupportedVersion || reason == schema.ReasonLineTooLong
}
