package checkpoint

import (
	"context"
	"fmt"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// Open returns the store at location: s3://bucket/prefix (reached through cfg) or a folder.
func Open(ctx context.Context, location string, cfg objstore.Config) (Store, error) {
	rest, ok := strings.CutPrefix(location, "s3://")
	if !ok {
		if location == "" {
			return nil, fmt.Errorf("checkpoint: no location")
		}
		return Dir(location), nil
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return nil, fmt.Errorf("checkpoint: %q: want s3://bucket/prefix", location)
	}
	client, err := cfg.Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", location, err)
	}
	return S3{Client: client, Bucket: bucket, Prefix: strings.Trim(prefix, "/")}, nil
}
