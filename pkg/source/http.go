package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// fetchHTTP fetches the dataset at URL spec.
func (f *fetcher) fetchHTTP(ctx context.Context, spec string) (string, error) {
	u, err := url.Parse(spec)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("source: %q: not a URL: %v", spec, err)
	}
	if strings.HasSuffix(u.Path, "/") { // a partitioned directory
		name := f.partitionFile()
		if name == "" {
			return "", fmt.Errorf("source: %s: a folder URL names a partitioned dataset; give the partition to fetch (or the URL of a prepared file or archive)", spec)
		}
		file := u.JoinPath(name).String()
		return f.dir, f.download(ctx, file, f.httpOpener(file), filepath.Join(f.dir, name), "")
	}
	name := path.Base(u.Path)
	if name == "." || name == "/" {
		name = "download"
	}
	dst := filepath.Join(f.dir, name)
	if err := f.download(ctx, spec, f.httpOpener(spec), dst, f.sha256); err != nil {
		return "", err
	}
	if graph.IsPreparedFile(dst) {
		return dst, nil
	}
	dir, err := unpack(dst, filepath.Join(f.dir, "unpacked"))
	if err != nil {
		return "", fmt.Errorf("source: %s: %w", spec, err)
	}
	return dir, nil
}

// httpOpener returns the opener of a URL: GET with a Range from the resume offset, pinned to
// the ETag with If-Match.
func (f *fetcher) httpOpener(rawURL string) opener {
	return func(ctx context.Context, off int64, pin string) (io.ReadCloser, int64, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, 0, "", err
		}
		if off > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
		}
		if pin != "" && !strings.HasPrefix(pin, "W/") {
			req.Header.Set("If-Match", pin)
		}
		resp, err := f.opts.HTTPClient.Do(req)
		if err != nil {
			return nil, 0, "", err
		}
		etag := resp.Header.Get("ETag")
		switch {
		case resp.StatusCode == http.StatusPreconditionFailed:
			resp.Body.Close()
			return nil, 0, "", fmt.Errorf("%w (ETag %s no longer matches)", ErrChanged, pin)
		case resp.StatusCode == http.StatusPartialContent && off > 0:
			start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
			if !ok || start != off {
				resp.Body.Close()
				return nil, 0, "", fmt.Errorf("answered range %q to a request from byte %d", resp.Header.Get("Content-Range"), off)
			}
			return resp.Body, total, etag, nil
		case resp.StatusCode == http.StatusOK:
			if pin != "" && etag != "" && etag != pin {
				resp.Body.Close()
				return nil, 0, "", fmt.Errorf("%w (ETag %s, was %s)", ErrChanged, etag, pin)
			}
			if off > 0 { // the server ignored the range: skip what we have
				if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
					resp.Body.Close()
					return nil, 0, "", err
				}
			}
			return resp.Body, resp.ContentLength, etag, nil
		}
		resp.Body.Close()
		return nil, 0, "", objstore.Classify(&objstore.StatusError{StatusCode: resp.StatusCode, Status: resp.Status})
	}
}

// parseContentRange parses "bytes START-END/TOTAL" (TOTAL may be "*": -1).
func parseContentRange(s string) (start, total int64, ok bool) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, false
	}
	rng, tot, ok := strings.Cut(rest, "/")
	a, _, ok2 := strings.Cut(rng, "-")
	if !ok || !ok2 {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return start, total, true
}
