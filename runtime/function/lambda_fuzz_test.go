package function

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/lambda/messages"

	"github.com/dorylus-gnn/dorylus/internal/hostile"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/lambda"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
)

// FuzzLambdaInvoke hands hostile payloads to the function's Lambda entry point, as the Lambda
// runtime would: a payload is either answered with a Lambda payload holding a result of the
// request's op, or refused with a bad-request error; nothing panics, and memory follows the
// payload's size. Pull descriptors are refused before any dial (no source is allowed here).
func FuzzLambdaInvoke(f *testing.F) {
	h, err := NewHandler(Faults{}, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	inv := lambdaHandler{h}
	for _, r := range append(remotetest.Tasks(1, 4, 6, 3), remotetest.GATTasks(2, 3, 5, 2)...) {
		f.Add(lambda.EncodePayload(dispatch.EncodeRequest(&r)))
	}
	f.Add([]byte(`"not base64!"`))
	f.Add([]byte(`{"a":1}`))
	budget := hostile.Budget{Fixed: 2 << 20, PerByte: 64, Quadratic: 8}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var op dispatch.Op
		decodable := false
		if wire, err := lambda.DecodePayload(payload); err == nil {
			if dispatch.IsDescriptor(wire) {
				t.Skip("a pull descriptor would dial the address it names")
			}
			if req, err := dispatch.DecodeRequest(wire); err == nil {
				op, decodable = req.Op, true
			}
		}
		var out []byte
		var err error
		budget.Check(t, len(payload), "Invoke", func() { out, err = inv.Invoke(context.Background(), payload) })
		if err != nil {
			var e messages.InvokeResponse_Error
			if !errors.As(err, &e) || e.Type != remote.ErrorTypeBadRequest {
				t.Fatalf("Invoke: %v: not a bad-request error", err)
			}
			return
		}
		if !decodable {
			t.Fatalf("Invoke answered a payload that does not decode as a request")
		}
		wire, err := lambda.DecodePayload(out)
		if err != nil {
			t.Fatalf("Invoke's answer is not a Lambda payload: %v", err)
		}
		if _, err := dispatch.DecodeResult(wire, op, dispatch.TaskResult{}); err != nil {
			t.Fatalf("Invoke's answer is not a %v result: %v", op, err)
		}
	})
}
