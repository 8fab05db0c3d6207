// Package checkpoint saves and restores training state — named float32 tensors (weights and
// optimizer moments), the epoch, the pipeline position, the RNG seed and state, and the identity
// of the run — in a Store: a folder (Dir) or an S3 prefix (S3).
//
// A checkpoint is two objects: the data object ckpt-EEEEEEEE.bin and then its manifest
// ckpt-EEEEEEEE.json, which holds the data object's size and CRC-32C. Each object is published
// whole (a folder writes under a temporary name, syncs and renames; S3 makes a PutObject
// visible only complete), and the manifest is published last, so a checkpoint without one (a
// crash mid-write) is ignored and the last good checkpoint is never replaced by an incomplete
// one. Latest verifies the checksum and skips torn or corrupt checkpoints. Save keeps the
// newest Keep checkpoints.
//
// Checkpoints belong to a run: each run keeps them in its own folder of a location (Sub; a job's
// UID or a CLI run's id names it), its RunID is in every manifest, and Load refuses a manifest
// of another run, so a run's prune never deletes another run's checkpoints and no run resumes
// from another's.
package checkpoint
