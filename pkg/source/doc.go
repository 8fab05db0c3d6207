// Package source fetches a dataset from where it lives — a local folder (a PVC mount), an S3
// bucket (s3://bucket/prefix) or an HTTP(S) URL — into a local folder or file that pkg/graph
// reads, so that pkg/graph stays free of network code.
//
// # Layouts
//
// s3://bucket/prefix names either one object (a prepared file) or the folder prefix/ (a prepared
// dataset directory, a partitioned directory written by `dorylus prepare --partitions`, or a
// plain-text dataset directory). With Options.Partitions set, a graph server fetches only its own
// partition file prefix/part-PPPPP-of-NNNNN.dorylus when it exists, else the whole dataset.
// An http(s) URL names a prepared file or a tar.gz archive of a dataset directory (checked
// against the dataset's SHA256 when given, then unpacked); a URL ending in "/" is a partitioned
// directory, of which the partition file is fetched.
//
// # Guarantees
//
// Downloads stream to a temporary file next to their destination and are renamed into place
// only once complete and verified, so a reader never sees a half-written file: a prepared file is
// teed through graph.VerifyPrepared as it arrives (every section's CRC-32C); an archive is
// checked against its SHA-256 before it is unpacked. A broken or stalled transfer is retried with
// backoff and resumed where it stopped with a Range request pinned to the object's ETag; an
// attempt that receives nothing for Options.StallTimeout is abandoned, so nothing hangs.
// Failures name the bucket and key or the URL and say what went wrong, wrapping
// objstore.ErrNotFound, objstore.ErrAccessDenied, ErrChecksum or ErrChanged. A file already
// fetched whose ETag still matches is reused.
package source
