// Package pipeline is the scheduler of Dorylus's bounded-asynchronous pipeline: a pure state
// machine, in the manner of etcd's raft. It does no I/O, starts no goroutines, reads no clock and
// draws no random numbers. The caller — a graph server — asks it which tasks are Ready
// (AppendReady), tells it which it Starts (and learns what each must read) and which are Done,
// does the work itself, and reports other servers' progress with Observe.
//
// # Tasks
//
// Each partition (graph server) cuts its vertices into intervals. Every interval runs the same
// sequence of tasks in every epoch (Sequence), one task at a time (but see Tail overlap), for a
// model with L weight matrices:
//
//	AV_0 SC_0 GA_0  AV_1 SC_1 GA_1  …  GA_{L-1}  AV_L
//	∇GA_{L-1} ∇SC_{L-1} ∇AV_{L-1}  …  ∇GA_0 ∇SC_0 ∇AV_0  WU
//
// as pkg/model cuts a GCN: AV_l computes P_l = drop(σ(Z_{l-1})) W_l, SC_l sends the interval's
// P_l rows to their ghost copies, GA_l computes Z_l = Â P_l on the interval's rows, AV_L is the
// loss and gives dZ_{L-1} (it folds ∇AV_L), ∇GA_l, ∇SC_l and ∇AV_l run the layer backwards, and
// WU hands the interval's dW to the parameter server. A Task names (partition, interval, epoch,
// layer, kind).
//
// Only two kinds of task read other intervals' rows. GA_l reads the P_l rows of its source
// intervals (Config.Reads; all intervals by default) as their SC_l produced them. In the
// backward pass, with PushGradients (pkg/model's cut, the default) ∇GA_l scatters Âᵀ dZ_l
// contributions into its sources' dP_l rows, ∇SC_l ships them, and ∇AV_l of interval j reads the
// contributions of every interval that reads j; with PullGradients ∇GA_l of j reads the dZ_l rows
// of every interval that reads j, as produced by their AV_L (l = L-1) or ∇AV_{l+1}. Start says,
// for each source, which epoch's rows to read (Started.Reads).
//
// # Synchronous mode
//
// With Config.Staleness synchronous (jobconfig.Sync) a task that reads other intervals' rows of
// layer l at epoch e waits until every interval of every partition has produced its layer-l
// rows of epoch e: a barrier after every Scatter (and every gradient exchange). Every read is of the same epoch, there is one
// weight version per epoch, and the data flow is exactly that of full-graph training.
//
// # Asynchronous mode and the staleness bound
//
// With staleness S ≥ 0 there is no per-layer barrier; instead
//
//   - the epoch gate: no interval starts epoch e (its AV_0) unless e ≤ m + S, where m is the
//     lowest epoch not yet finished (WU done) by any interval (LowestUnfinished);
//   - a reading task reads the freshest rows present: the newest epoch each source has produced.
//     It waits only while some source has produced none yet (early epochs).
//
// Together these bound every value read: a source s has finished every epoch below its own
// lowest unfinished epoch e_s ≥ m, so its newest rows come from epoch ≥ e_s − 1 ≥ e − S − 1; no
// value read is more than S + 1 epochs old (age = reading epoch − producing epoch; it may be
// negative when the source is ahead). S = 0 keeps only the epoch gate: every interval finishes
// epoch e before any starts e + 1, but within an epoch GA may read last epoch's rows.
//
// # Drains
//
// With Config.DrainEvery = N the gate closes every N epochs: no interval starts an epoch that
// is a multiple of N until every interval has finished the one before it. The pipeline then
// runs empty at that boundary once per N epochs: every gradient of the earlier epochs has been
// pushed and none of a later one, so the parameter servers hold weights that a checkpoint can
// save and a restarted run can resume from. With S = 0 the gate drains every epoch already;
// with S ≥ 1 a drain costs about one pipeline fill per N epochs.
//
// # Tail overlap
//
// With Config.TailOverlap (asynchronous mode, S ≥ 1) an interval's epoch is cut in two lanes:
// the head, its forward pass (AV_0 … AV_L), and the tail, its backward pass and WU (∇GA_{L-1} …
// ∇AV_0 WU). Once the head of epoch e is done, the head of epoch e+1 may start — within the epoch
// gate, which counts an epoch finished only at its WU — while the tail of epoch e still runs, so
// an interval's tensor tasks of two epochs overlap instead of forming one chain. The head of
// epoch e+2 waits until the tail of epoch e is done, so an interval has at most two epochs in
// progress; each lane still runs one task at a time, and the bounds below are unchanged: a source
// whose head is at e_s+1 has produced the forward flows of e_s, and its tail, at e_s ≥ m, the
// backward flows of e_s - 1.
//
// # Weight stashing
//
// An interval's AV_0 pins the newest weight version v (WeightVersion); every AV_l, ∇AV_l and
// WU of that interval's epoch uses v again (Started.Weights), so its backward pass sees the
// weights its forward pass saw. The pin lasts until the epoch's WU is done. PinnedVersions lists
// the pinned versions so that the parameter server can drop the others (it keeps the newest
// too). Versions start at 0; the scheduler counts them itself — in asynchronous mode each WU
// done applies that interval's gradient and makes a new version, in synchronous mode the
// version moves once per epoch, when every interval's WU of it is done — unless
// Config.ExternalVersions hands that job to the caller (SetWeightVersion), as a graph server of
// a multi-server asynchronous run needs. In synchronous mode an epoch's AV_0 also waits until
// the version has moved past the previous epoch's.
//
// # Several graph servers
//
// Each graph server runs a Scheduler over the whole configuration with Config.Local set to its
// own partition; it Starts and Dones its own tasks and Observes the others' as their rows and
// progress reports arrive (observing a task implies every earlier task of its interval). A
// scheduler's view of remote intervals can only lag behind the truth, so its epoch gate and its
// reads stay within the bounds. (Graph server 0's coordinator runs no Scheduler of its own: it
// reads the epoch gate and the weight version off its server's.)
//
// # Observers
//
// LastEpoch, Finished, LocalFinished, InFlight, LowestUnfinished, Progress, Next, Running,
// Ready and Blocked answer questions about the state without changing it. A graph server needs
// none of them (it uses AppendReady, WeightVersion and PinnedVersions) but Blocked, which names
// what an idle interval waits for in its trace; the property tests check every step with them,
// and they are cheap, so they stay exported for tests and tools.
//
// # Files
//
// scheduler.go holds the Scheduler and its transitions (Start, Done, Observe); lane.go an
// interval's two lanes; flows.go the rows each interval has produced for the others and what
// a task reads; ready.go the ready sets; versions.go weight versions and pins; steps.go what
// each step of Sequence reads and produces; config.go and task.go the types callers use.
package pipeline
