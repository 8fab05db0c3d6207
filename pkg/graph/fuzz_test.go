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
