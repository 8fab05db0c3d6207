// Command lambda packages `dorylus function` for AWS Lambda's provided runtimes (build.sh runs
// it): a zip holding one executable, bootstrap, byte for byte the same for the same binary
// (a fixed time, one entry, mode 0755).
//
//	go run ./hack/lambda zip --out FILE BOOTSTRAP
package main

import (
	"archive/zip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// zipTime is the modification time of the zip's entry: the earliest a zip's DOS time holds.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lambda:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "zip" {
		return errors.New("usage: lambda zip --out FILE BOOTSTRAP")
	}
	fset := flag.NewFlagSet("zip", flag.ContinueOnError)
	out := fset.String("out", "", "the zip to write")
	if err := fset.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" || fset.NArg() != 1 {
		return errors.New("usage: lambda zip --out FILE BOOTSTRAP")
	}
	bin, err := os.Open(fset.Arg(0))
	if err != nil {
		return err
	}
	defer bin.Close()
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := writeZip(f, bin); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", *out, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}

// writeZip writes a zip holding bin as the executable bootstrap.
func writeZip(w io.Writer, bin io.Reader) error {
	zw := zip.NewWriter(w)
	hdr := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: zipTime}
	hdr.SetMode(0o755)
	fw, err := zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fw, bin); err != nil {
		return err
	}
	return zw.Close()
}
