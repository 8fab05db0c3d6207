// Package lambda is the AWS Lambda tensor backend: a remote.Backend whose transport invokes a
// function running `dorylus function` with aws-sdk-go-v2's Invoke (RequestResponse). The wire
// bytes travel as a JSON string of their base64 (a Lambda payload must be JSON), so a task is
// cut by rows when its request or result would pass Lambda's 6 MB limit. Credentials come from
// the SDK's default chain (environment, shared files, web identity as IRSA sets it up, EKS pod
// identity) or a mounted Secret's folder (Options.CredentialsDir), unless Options.Config is
// given.
//
// A function error is detected both from the X-Amz-Function-Error header and from an
// errorMessage/errorType payload, because the Lambda runtime interface emulator sets only the
// latter. Errors of type remote.ErrorTypeBadRequest fail the task at once; other function
// errors, throttling (429), 5xx answers, timeouts and lost connections are retried.
package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// Options configures a Lambda backend.
type Options struct {
	// Function is the function's name or ARN.
	Function string
	// Region is the AWS region.
	Region string
	// Qualifier is the version or alias to invoke (empty: $LATEST).
	Qualifier string
	// Endpoints override the service endpoint (base URLs, e.g. of emulators); empty: the
	// region's endpoint.
	Endpoints []string
	// CredentialsDir holds the files accessKeyID, secretAccessKey and optionally
	// sessionToken (a mounted Secret); empty: the SDK's default chain.
	CredentialsDir string
	// Config is the AWS configuration; nil loads the default chain with Region (and
	// CredentialsDir). Its HTTPClient, if set, replaces the backend's pooled client.
	Config *aws.Config
	// Tuning holds concurrency, timeouts, retries and straggler settings; New sets its Name,
	// Endpoints and payload limits.
	Tuning remote.Options
}

// New returns a backend that invokes the function.
func New(ctx context.Context, o Options) (*remote.Backend, error) {
	if o.Function == "" || o.Region == "" {
		return nil, fmt.Errorf("lambda backend: function %q, region %q: both are required", o.Function, o.Region)
	}
	var cfg aws.Config
	if o.Config != nil {
		cfg = *o.Config
	} else {
		opts := []func(*config.LoadOptions) error{config.WithRegion(o.Region)}
		if o.CredentialsDir != "" {
			p, err := objstore.StaticCredentials(o.CredentialsDir)
			if err != nil {
				return nil, fmt.Errorf("lambda backend: %w", err)
			}
			opts = append(opts, config.WithCredentialsProvider(p))
		}
		var err error
		if cfg, err = config.LoadDefaultConfig(ctx, opts...); err != nil {
			return nil, fmt.Errorf("lambda backend: AWS configuration: %w", err)
		}
	}
	conns := max(o.Tuning.MaxConcurrency, 1)
	client := awslambda.NewFromConfig(cfg, func(lo *awslambda.Options) {
		lo.Region = o.Region
		lo.Retryer = aws.NopRetryer{} // the backend retries, relaunches and counts
		// A caller's Config.HTTPClient is used as given.
		if o.Config == nil || o.Config.HTTPClient == nil {
			lo.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
				t.MaxIdleConnsPerHost = conns
			})
		}
	})
	t := &transport{client: client, function: o.Function}
	if o.Qualifier != "" {
		t.qualifier = aws.String(o.Qualifier)
	}
	r := o.Tuning
	r.Name = "lambda " + o.Function
	r.Endpoints = o.Endpoints
	if len(r.Endpoints) == 0 {
		r.Endpoints = []string{""}
	}
	r.MaxRequestBytes, r.MaxResultBytes = MaxWireBytes, MaxWireBytes
	return remote.New(t, r)
}

// transport invokes the function.
type transport struct {
	client    *awslambda.Client
	function  string
	qualifier *string
}

// Call invokes the function at endpoint ("" for the region's) with body.
func (t *transport) Call(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
	in := &awslambda.InvokeInput{
		FunctionName: aws.String(t.function), Qualifier: t.qualifier,
		InvocationType: types.InvocationTypeRequestResponse, Payload: EncodePayload(body),
	}
	out, err := t.client.Invoke(ctx, in, func(o *awslambda.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	if err != nil {
		return nil, classify(ctx, endpoint, err)
	}
	if out.FunctionError != nil || isErrorPayload(out.Payload) {
		return nil, functionError(endpoint, out)
	}
	wire, err := DecodePayload(out.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: unexpected answer %q", remote.ErrTransient, where(endpoint), snippet(out.Payload))
	}
	return wire, nil
}

// classify wraps an Invoke error in the remote error classes.
func classify(ctx context.Context, endpoint string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var throttle *types.TooManyRequestsException
	var re *awshttp.ResponseError
	switch {
	case errors.As(err, &throttle):
		return fmt.Errorf("%w: %w: %s: %w", remote.ErrTransient, remote.ErrThrottled, where(endpoint), err)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %w: %s: %w", remote.ErrTransient, remote.ErrThrottled, where(endpoint), err)
	case errors.As(err, &re) && re.HTTPStatusCode() >= 500:
		return fmt.Errorf("%w: %s: %w", remote.ErrTransient, where(endpoint), err)
	case errors.As(err, &re) && re.HTTPStatusCode() < 300:
		// the invocation succeeded but its answer was lost on the way (the connection broke
		// while the payload was read)
		return fmt.Errorf("%w: %s: answer lost: %w", remote.ErrTransient, where(endpoint), err)
	case errors.As(err, &re):
		return fmt.Errorf("%s: %w", where(endpoint), err)
	}
	return fmt.Errorf("%w: %w: %s: %w", remote.ErrTransient, remote.ErrUnreachable, where(endpoint), err)
}

// functionPayloadError is the payload of a function error.
type functionPayloadError struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
}

func isErrorPayload(p []byte) bool {
	if len(p) == 0 || p[0] != '{' {
		return false
	}
	var e functionPayloadError
	return json.Unmarshal(p, &e) == nil && (e.Message != "" || e.Type != "")
}

// functionError returns the error of an invocation that failed inside the function.
func functionError(endpoint string, out *awslambda.InvokeOutput) error {
	var e functionPayloadError
	if json.Unmarshal(out.Payload, &e) != nil {
		e.Message = snippet(out.Payload)
	}
	if e.Type == "" && out.FunctionError != nil {
		e.Type = *out.FunctionError
	}
	if e.Type == remote.ErrorTypeNeedCertificate {
		nc, err := remote.ParseNeedCertificate(e.Message)
		if err != nil {
			return fmt.Errorf("%s: %w", where(endpoint), err)
		}
		return nc
	}
	if e.Type == remote.ErrorTypeBadRequest {
		return fmt.Errorf("%s: function refused the request: %w: %s", where(endpoint), dispatch.ErrRequest, e.Message)
	}
	return fmt.Errorf("%w: %s: function error %s: %s", remote.ErrTransient, where(endpoint), e.Type, e.Message)
}

func where(endpoint string) string {
	if endpoint == "" {
		return "invoke"
	}
	return "invoke at " + endpoint
}

// snippet returns the start of a payload, for an error message.
func snippet(p []byte) string {
	if len(p) > 200 {
		return string(p[:200]) + "…"
	}
	return string(p)
}
