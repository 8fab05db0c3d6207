// Package npy reads and writes NumPy .npy arrays of little-endian float32 ('<f4') and int32
// ('<i4') in C order: the magic "\x93NUMPY", a format version, the header length, a Python dict
// literal giving descr, fortran_order and shape, padded so that the data starts 64-byte
// aligned, then the raw data. The encoders emit version 1.0 (2.0 for a header over 64 KiB); Decode also reads 2.0 and 3.0 (a 4-byte
// header length).
//
// Decode checks the header and the data length before it reads any data: a truncated or
// malformed file is an error wrapping ErrFormat, never a panic.
package npy
