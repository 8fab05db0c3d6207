package graphserver

import (
	"context"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// An evaluation pass beside training runs in buffers of its own (its layers' and those in which
// it gathers the rows it sends), made on its first use and sharing no memory with training's; the pass of the last epoch, and every pass after it (the
// export pass), runs in training's buffers and makes none; an inference, which never trains,
// makes none. For a GCN, a GraphSAGE network (whose S_l the pass reuses too) and a GAT.
func TestEvaluationReusesTrainingBuffers(t *testing.T) {
	for _, m := range []struct {
		name  string
		model func(*Config)
	}{
		{"gcn", func(*Config) {}},
		{"sage", func(c *Config) { c.SAGE = true }},
		{"gat", func(c *Config) { c.Heads, c.OutHeads = 2, 1 }},
	} {
		t.Run(m.name, func(t *testing.T) {
			cfg := fuzzConfigs(t)[0]
			m.model(&cfg)
			s, err := newServer(context.Background(), &errgroup.Group{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			training := s.lay.passBuffers(s.model)
			shares := func(set *passSet) bool {
				if len(set.send) != cfg.Partitions {
					t.Fatalf("send buffers for %d peers, want %d", len(set.send), cfg.Partitions)
				}
				sends := false
				for q, buf := range set.send {
					if len(buf) > 0 && &buf[0] == &s.lay.send[0][q][0] {
						sends = true
					}
				}
				for l, pb := range set.layers {
					for _, pair := range [][2]*tensor.Dense{{pb.p, training[l].p}, {pb.z, training[l].z}, {pb.scores, training[l].scores}, {pb.self, training[l].self}} {
						if (pair[0] == nil) != (pair[1] == nil) {
							t.Fatalf("layer %d: a pass buffer present in one set only", l)
						}
						if pair[0] != nil && (&pair[0].Data[0] == &pair[1].Data[0]) != sends {
							t.Fatalf("layer %d: a pass shares some of training's buffers, not all", l)
						}
					}
				}
				return sends
			}
			if _, sage := s.model.(selfRower); sage != cfg.SAGE || (training[0].self != nil) != cfg.SAGE {
				t.Fatalf("GraphSAGE %v, but the model's S_l rows present %v", cfg.SAGE, training[0].self != nil)
			}

			e := newEvaluator(s.lay, s.model, s.peers, s.weights, cfg.Epochs, true)
			beside := e.buffers(0) // the run has 3 epochs: epoch 1's pass runs beside training
			if e.own == nil || shares(beside) {
				t.Fatal("a pass beside training did not get buffers of its own")
			}
			if again := e.buffers(1); again != beside {
				t.Fatal("a second pass beside training made new buffers")
			}
			for _, id := range []int{cfg.Epochs - 1, int(cfg.exportID())} {
				if !shares(e.buffers(id)) {
					t.Fatalf("pass %d after training got buffers of its own", id)
				}
			}

			e = newEvaluator(s.lay, s.model, s.peers, s.weights, cfg.Epochs, true)
			if !shares(e.buffers(cfg.Epochs-1)) || !shares(e.buffers(int(cfg.exportID()))) || e.own != nil {
				t.Fatal("a run evaluated only at its end made evaluation buffers")
			}
			e = newEvaluator(s.lay, s.model, s.peers, s.weights, cfg.Epochs, false)
			if !shares(e.buffers(int(cfg.exportID()))) || e.own != nil {
				t.Fatal("an inference made evaluation buffers")
			}
		})
	}
}
