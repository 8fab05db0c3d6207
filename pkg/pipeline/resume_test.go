package pipeline

import (
	"errors"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// TestFirstEpoch checks a run resumed after 3 of 5 epochs, synchronous, with the scheduler's
// and with external versions: the first tasks are of epoch 3, the first epoch pins version 3
// and the next version 4, and the run finishes after epoch 4.
func TestFirstEpoch(t *testing.T) {
	for _, external := range []bool{false, true} {
		s := mustNew(t, Config{Partitions: 1, Intervals: 2, Layers: 2, Epochs: 5, FirstEpoch: 3, Staleness: jobconfig.Sync, ExternalVersions: external})
		if s.WeightVersion() != 3 || s.LowestUnfinished() != 3 {
			t.Fatalf("external %v: version %d, lowest unfinished %d; want 3 and 3", external, s.WeightVersion(), s.LowestUnfinished())
		}
		if _, err := s.Start(task(0, 0, 2, KindAV, 0)); err == nil {
			t.Errorf("external %v: a task of epoch 2 started in a run resumed at epoch 3", external)
		}
		for e := 3; e < 5; e++ {
			for _, st := range Sequence(2) {
				for i := 0; i < 2; i++ {
					got := run(t, s, task(0, i, e, st.Kind, st.Layer))
					if st.Kind == KindAV && st.Layer == 0 && got.Weights != e {
						t.Errorf("external %v: epoch %d pinned version %d", external, e, got.Weights)
					}
				}
			}
			if external {
				if err := s.SetWeightVersion(e + 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !s.Finished() || len(s.Ready()) != 0 {
			t.Errorf("external %v: not finished after epoch 4 (ready %v)", external, s.Ready())
		}
	}
	for _, first := range []int{-1, 5} {
		if _, err := New(Config{Partitions: 1, Intervals: 1, Layers: 1, Epochs: 5, FirstEpoch: first, Staleness: jobconfig.Sync}); !errors.Is(err, ErrConfig) {
			t.Errorf("first epoch %d of 5: %v, want ErrConfig", first, err)
		}
	}
}
