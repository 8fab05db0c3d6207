package controllers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/model"
)

// TestBuiltinWidthsAreTheDatasets keeps builtinWidths equal to what the builtin datasets are:
// one entry for each name of the CRD's enum, with the features and classes of its meta.json.
func TestBuiltinWidthsAreTheDatasets(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "api", "v1alpha1", "dataset_types.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\+kubebuilder:validation:Enum=(cora;[a-z_;]+)`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no builtin datasets' enum in api/v1alpha1/dataset_types.go")
	}
	names := strings.Split(string(m[1]), ";")
	var have []string
	for n := range builtinWidths {
		have = append(have, n)
	}
	slices.Sort(names)
	slices.Sort(have)
	if !slices.Equal(names, have) {
		t.Fatalf("builtinWidths has %v, the CRD's builtin datasets are %v", have, names)
	}
	for _, n := range names {
		raw, err := os.ReadFile(filepath.Join("..", "datasets", n, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Features int64 `json:"num_features"`
			Classes  int64 `json:"num_classes"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatalf("datasets/%s/meta.json: %v", n, err)
		}
		if w := builtinWidths[n]; w != [2]int64{meta.Features, meta.Classes} {
			t.Errorf("builtinWidths[%s] = %v, its meta.json says %d features and %d classes", n, w, meta.Features, meta.Classes)
		}
	}
}

// TestCheckpointBytesCountsTheModel compares checkpointBytes with the parameters pkg/model
// makes for the same network (12 bytes each: the weight and Adam's two moments): equal for a
// GCN and a GraphSAGE network, and for a GAT not below them and within 1 % above (it counts
// the output layer's attention vectors and bias as wide as a hidden layer).
func TestCheckpointBytesCountsTheModel(t *testing.T) {
	for _, c := range []struct {
		name string
		spec dorylusv1alpha1.GNNTrainingJobSpec
	}{
		{"gcn", dorylusv1alpha1.GNNTrainingJobSpec{Model: dorylusv1alpha1.ModelSpec{Architecture: dorylusv1alpha1.ArchitectureGCN, Layers: 2, Hidden: 16}}},
		{"gcn-deep", dorylusv1alpha1.GNNTrainingJobSpec{Model: dorylusv1alpha1.ModelSpec{Architecture: dorylusv1alpha1.ArchitectureGCN, Layers: 4, Hidden: 256}}},
		{"sage", dorylusv1alpha1.GNNTrainingJobSpec{Model: dorylusv1alpha1.ModelSpec{Architecture: dorylusv1alpha1.ArchitectureSAGE, Layers: 3, Hidden: 64}}},
		{"gat", dorylusv1alpha1.GNNTrainingJobSpec{Model: dorylusv1alpha1.ModelSpec{Architecture: dorylusv1alpha1.ArchitectureGAT, Layers: 2, Hidden: 8, Heads: ptr.To[int32](8)}}},
		{"gat-default-heads", dorylusv1alpha1.GNNTrainingJobSpec{Model: dorylusv1alpha1.ModelSpec{Architecture: dorylusv1alpha1.ArchitectureGAT, Layers: 3, Hidden: 16}}},
	} {
		for _, ds := range []string{"cora", "coauthor_cs", "elsewhere"} {
			t.Run(c.name+"/"+ds, func(t *testing.T) {
				spec := c.spec
				in, classes := int64(assumedFeatures), int64(assumedClasses)
				if w, ok := builtinWidths[ds]; ok {
					spec.Dataset.Builtin = &dorylusv1alpha1.BuiltinDataset{Name: ds}
					in, classes = w[0], w[1]
				}
				m := spec.Model
				width := int(m.Hidden)
				heads := 0
				if m.Architecture == dorylusv1alpha1.ArchitectureGAT {
					heads = int(ptr.Deref(m.Heads, defaultGATHeads))
					width *= heads
				}
				dims := []int{int(in)}
				for range m.Layers - 1 {
					dims = append(dims, width)
				}
				dims = append(dims, int(classes))
				var p model.Parameters
				var err error
				if m.Architecture == dorylusv1alpha1.ArchitectureSAGE {
					p, err = model.SAGEParametersOf(dims)
				} else {
					p, err = model.ParametersOf(dims, heads, 1)
				}
				if err != nil {
					t.Fatal(err)
				}
				var want int64
				for _, s := range p.Shapes {
					want += 12 * int64(s[0]) * int64(s[1])
				}
				got := checkpointBytes(&spec)
				if got < want || (heads == 0 && got != want) || float64(got) > 1.01*float64(want) {
					t.Errorf("checkpointBytes %d, the model's parameters take %d", got, want)
				}
			})
		}
	}
}
