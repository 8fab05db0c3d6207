package lambda_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/knative"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/pulltest"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
)

// benchConcurrency is the calls in flight of the throughput benchmarks: cpu workers, HTTP
// connections, emulators.
const benchConcurrency = 4

// BenchmarkBackends runs the same tensor tasks on the cpu backend, on `dorylus function` over
// HTTP (the knative backend) and on aws-lambda-rie emulators (the lambda backend), on
// loopback. overhead: one call at a time of a one-row task, whose compute is negligible,
// reporting the p50 and p99 latency of a call; tasks: the forward and backward tasks of a
// Cora-sized interval (680 rows, 1433 sparse features, 16 hidden) with benchConcurrency in
// flight, reporting tasks per second. The -pull variants send descriptors: the function
// fetches the inputs from a loopback task source and the weights from a parameter server.
func BenchmarkBackends(b *testing.B) {
	url, _ := remotetest.HTTPFunction(b, dorylus, "--insecure", remotetest.PullLoopback) // plaintext task source and parameter server
	eps := emulators(b, benchConcurrency, nil, "--insecure")
	fixed := remote.Options{MaxConcurrency: benchConcurrency, Fixed: true, StragglerFactor: -1}
	cpuB, err := cpu.New(cpu.Options{Workers: benchConcurrency})
	if err != nil {
		b.Fatal(err)
	}
	httpB, err := knative.New(knative.Options{URLs: []string{url}, Token: remotetest.Token, TLS: remotetest.ClientTLS(b), Tuning: fixed})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { httpB.Close() })
	tiny := remotetest.Tasks(1, 1, 8, 4)[0]
	all := remotetest.Tasks(2, 680, 1433, 16)
	store, pulled := pulltest.Source(b, all, nil, nil)
	pull := fixed
	pull.Pull = store
	httpPull, err := knative.New(knative.Options{URLs: []string{url}, Token: remotetest.Token, TLS: remotetest.ClientTLS(b), Tuning: pull})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { httpPull.Close() })
	backends := []struct {
		name string
		b    dispatch.Backend
		all  []dispatch.TaskRequest
	}{{"cpu", cpuB, all}, {"http", httpB, all}, {"lambda-rie", newBackend(b, eps, fixed), all},
		{"http-pull", httpPull, pulled}, {"lambda-rie-pull", newBackend(b, eps, pull), pulled}}
	for _, be := range backends {
		work := []dispatch.TaskRequest{be.all[0], be.all[1], be.all[3], be.all[4]} // AV_0, AV_1, ∇AV_0, ∇AV_1
		// warm every worker (an emulator starts its function on the first call)
		var warm sync.WaitGroup
		for range benchConcurrency {
			warm.Go(func() {
				if _, err := be.b.Run(context.Background(), work[0]); err != nil {
					b.Error(err)
				}
			})
		}
		warm.Wait()
		b.Run(be.name+"/overhead", func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				if _, err := be.b.Run(context.Background(), tiny); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
		b.Run(be.name+"/tasks", func(b *testing.B) {
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for range benchConcurrency {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						if _, err := be.b.Run(context.Background(), work[i%int64(len(work))]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}
