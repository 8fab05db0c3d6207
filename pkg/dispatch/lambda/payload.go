package lambda

import (
	"encoding/base64"
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
)

// MaxPayloadBytes is Lambda's limit on a synchronous invocation's request and on its
// response: 6 MB.
const MaxPayloadBytes = 6 << 20

// MaxWireBytes is the largest wire encoding that fits MaxPayloadBytes once wrapped by
// EncodePayload.
const MaxWireBytes = (MaxPayloadBytes - 2) / 4 * 3

// EncodePayload wraps the wire bytes of a request or result as a Lambda payload, which must
// be JSON: a JSON string holding their standard base64.
func EncodePayload(wire []byte) []byte {
	p := make([]byte, base64.StdEncoding.EncodedLen(len(wire))+2)
	p[0], p[len(p)-1] = '"', '"'
	base64.StdEncoding.Encode(p[1:len(p)-1], wire)
	return p
}

// DecodePayload returns the wire bytes of a payload EncodePayload made; other payloads get an
// error wrapping dispatch.ErrRequest.
func DecodePayload(p []byte) ([]byte, error) {
	if len(p) < 2 || p[0] != '"' || p[len(p)-1] != '"' {
		return nil, fmt.Errorf("%w: lambda payload of %d bytes is not a JSON string of base64", dispatch.ErrRequest, len(p))
	}
	wire := make([]byte, base64.StdEncoding.DecodedLen(len(p)-2))
	n, err := base64.StdEncoding.Decode(wire, p[1:len(p)-1])
	if err != nil {
		return nil, fmt.Errorf("%w: lambda payload: %v", dispatch.ErrRequest, err)
	}
	return wire[:n], nil
}
