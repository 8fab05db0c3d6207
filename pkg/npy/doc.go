// Package npy reads and writes NumPy .npy arrays of little-endian float32 ('<f4'), float64
// ('<f8'), int32 ('<i4'), int64 ('<i8') and bool ('|b1') in C order: the magic "\x93NUMPY", a
// format version, the header length, a Python dict literal giving descr, fortran_order and
// shape, padded so that the data starts 64-byte aligned, then the raw data. The encoders emit
// version 1.0 (2.0 for a header over 64 KiB); Decode and Read also read 2.0 and 3.0 (a 4-byte
// header length). Archive reads .npz files, the zip archives of .npy members that np.savez
// (stored) and np.savez_compressed (deflated) write; EncodeArchive writes them stored.
//
// Decode and Read check the header and the data length before they allocate anything for the
// data: a truncated or malformed file is an error wrapping ErrFormat, never a panic.
package npy
