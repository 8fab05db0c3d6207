package graph

import (
	"bytes"
	"testing"
	"testing/fstest"
)

// FuzzLoadText feeds arbitrary meta.json, edge, feature (gzipped by the harness), label and
// split files to the text loader: it must never panic, and what it accepts must be valid and
// survive the prepared round trip.
func FuzzLoadText(f *testing.F) {
	f.Add([]byte(tinyMeta), []byte(tinyEdges), []byte(tinyFeatures), []byte(tinyLabels), []byte(tinyTrain), []byte(tinyVal), []byte(tinyTest))
	f.Fuzz(func(t *testing.T, meta, edges, features, labels, train, val, test []byte) {
		fsys := fstest.MapFS{
			"d/meta.json":       {Data: meta},
			"d/edges.txt":       {Data: edges},
			"d/edges.txt.gz":    {Data: gz(t, string(edges))},
			"d/features.txt.gz": {Data: gz(t, string(features))},
			"d/labels.txt":      {Data: labels},
			"d/train.txt":       {Data: train},
			"d/val.txt":         {Data: val},
			"d/test.txt":        {Data: test},
		}
		d, err := LoadTextWith(fsys, "d", LoadOptions{AllowMissingFeatures: true})
		if err != nil {
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("LoadText accepted an invalid dataset: %v", err)
		}
		var b bytes.Buffer
		if err := WritePrepared(&b, d); err != nil {
			t.Fatal(err)
		}
		back, err := readBytes(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffDatasets(d, back); diff != "" {
			t.Fatalf("prepared round trip differs in %s", diff)
		}
	})
}

// FuzzReadPrepared feeds arbitrary bytes to the prepared reader, optionally with the checksums
// fixed up so that the structural checks behind them are reached: it must never panic, and
// what it accepts must be valid.
func FuzzReadPrepared(f *testing.F) {
	f.Add(preparedBytes(f, loadTiny(f)), false)
	f.Add(preparedBytes(f, loadTiny(f)), true)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = bytes.Clone(data)
			fixChecksums(data)
		}
		d, err := readBytes(data)
		if err != nil {
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("ReadPrepared accepted an invalid dataset: %v", err)
		}
	})
}

// FuzzLoadOGB feeds arbitrary files (gzipped by the harness) of OGB's node-property layout to
// LoadOGB: it must never panic, and what it accepts must be valid and survive the prepared
// round trip.
func FuzzLoadOGB(f *testing.F) {
	var files [][]byte
	for _, name := range ogbFuzzFiles {
		files = append(files, []byte(ogbTinyFiles[name]))
	}
	f.Add(files[0], files[1], files[2], files[3], files[4], files[5], files[6], files[7])
	f.Fuzz(func(t *testing.T, nodes, edges, edgeList, feat, labels, train, valid, test []byte) {
		fsys := fstest.MapFS{}
		for i, data := range [][]byte{nodes, edges, edgeList, feat, labels, train, valid, test} {
			fsys["o/"+ogbFuzzFiles[i]] = &fstest.MapFile{Data: gz(t, string(data))}
		}
		d, err := LoadOGB(fsys, "o", "o", LoadOptions{})
		checkLoaded(t, "LoadOGB", d, err)
	})
}

// ogbFuzzFiles are the files FuzzLoadOGB writes, in the order of its arguments.
var ogbFuzzFiles = []string{"raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz", "raw/edge.csv.gz", "raw/node-feat.csv.gz",
	"raw/node-label.csv.gz", "split/s/train.csv.gz", "split/s/valid.csv.gz", "split/s/test.csv.gz"}

// FuzzLoadNumPy feeds arbitrary .npz archives to the NumPy loader, seeded with the tiny
// dataset's arrays: it must never panic, every refusal must be an error with no dataset, and
// what it accepts must be valid and survive the prepared round trip.
func FuzzLoadNumPy(f *testing.F) {
	f.Add(npzOf(f, npTiny(f)))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := loadNPZ(b, LoadOptions{AllowMissingFeatures: true})
		checkLoaded(t, "loadNumPy", d, err)
	})
}

// checkLoaded fails t when loader returned a dataset with its error, or accepted one that is
// invalid or does not survive the prepared round trip.
func checkLoaded(t *testing.T, loader string, d *Dataset, err error) {
	t.Helper()
	if err != nil {
		if d != nil {
			t.Fatalf("%s returned a dataset with its error %v", loader, err)
		}
		return
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("%s accepted an invalid dataset: %v", loader, err)
	}
	back, err := readBytes(preparedBytes(t, d))
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDatasets(d, back); diff != "" {
		t.Fatalf("prepared round trip differs in %s", diff)
	}
}
