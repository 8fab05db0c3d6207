// Package safetensors reads and writes float32 tensors in the safetensors format: an 8-byte
// little-endian unsigned header length N, N bytes of a JSON object that maps each tensor name to
// its dtype, shape and [begin, end) byte offsets in the data that follows (plus an optional
// "__metadata__" object of strings), then the raw little-endian data. The data section holds the
// tensors back to back, with no holes. Only the F32 dtype is read and written.
//
// Decode checks every length and offset before it reads any data: a truncated or malformed file
// is an error wrapping ErrFormat, never a panic.
package safetensors
