package jobconfig

import "strings"

// OutputMountPath is where a pvc output volume is mounted.
const OutputMountPath = "/data/output"

// Location is a folder: a local path or an S3 prefix; exactly one is set.
type Location struct {
	// Path is a local folder (under OutputMountPath in a pod for a pvc).
	Path string `json:"path,omitempty"`
	// S3 is a bucket location.
	S3 *S3 `json:"s3,omitempty"`
}

// URI returns the location as the dorylus command takes it: the path, or s3://bucket/prefix.
func (l Location) URI() string {
	if l.S3 != nil {
		return "s3://" + l.S3.Bucket + "/" + strings.Trim(l.S3.Prefix, "/")
	}
	return l.Path
}

// Inference makes a run predict with a saved model instead of training.
type Inference struct {
	// Model is the folder `dorylus train --output-dir` or a job's output wrote.
	Model Location `json:"model"`
}

func (l *Location) validate(v *validator, field string) {
	v.check((l.Path != "") != (l.S3 != nil), field, "must set exactly one of path, s3")
	if l.S3 != nil {
		v.nonEmpty(field+".s3.bucket", l.S3.Bucket)
	}
}

// ModelMountPath is where a pvc inference model volume is mounted.
const ModelMountPath = "/data/model"
