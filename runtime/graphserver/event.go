package graphserver

// EventKind names what an Event reports; the launcher (runtime/launcher) and the harness
// decode the lines by it.
type EventKind string

// The kinds of Event graph server 0 writes.
const (
	EventEpoch    EventKind = "epoch"    // an epoch completed on every graph server
	EventResult   EventKind = "result"   // the final evaluation
	EventExported EventKind = "exported" // the export pass wrote its files (Config.Export)
	// EventPreempted: a preemption's drain ended (preempt.go); Epoch is the epoch the
	// parameter servers checkpoint, which a resumed run starts after.
	EventPreempted EventKind = "preempted"
)

// Event is one JSON line the coordinator writes to Config.Events.
type Event struct {
	Event EventKind `json:"event"`
	// epoch: the epoch (1-based), its training loss, the validation accuracy if evaluated
	// after it, its duration (between the completions of consecutive epochs across all
	// servers), and the tensor payload bytes the graph servers sent each other during it.
	Epoch   int      `json:"epoch"`
	Loss    float64  `json:"loss,omitempty"`
	ValAcc  *float64 `json:"val_accuracy,omitempty"`
	Seconds float64  `json:"seconds,omitempty"`
	Bytes   uint64   `json:"bytes,omitempty"`
	// PeakRSSBytes is the largest peak resident memory of any graph server so far.
	PeakRSSBytes int64 `json:"peak_rss_bytes,omitempty"`
	// epoch and result, with Config.Cost: the run's cost so far, the part of it since the
	// previous epoch, and the billed tensor calls of every graph server it counts (requests
	// and their billed duration) as the graph servers reported them; LocalTasks the tensor
	// tasks placement ran in the graph servers instead (dispatch.Placement).
	CostUSD       float64 `json:"cost_usd,omitempty"`
	EpochCostUSD  float64 `json:"epoch_cost_usd,omitempty"`
	Calls         int64   `json:"calls,omitempty"`
	BilledSeconds float64 `json:"billed_seconds,omitempty"`
	LocalTasks    int64   `json:"local_tasks,omitempty"`
	// result: the accuracies and losses of the final evaluation.
	TrainAcc float64 `json:"train_accuracy,omitempty"`
	// Selected is, with Config.Patience, the epoch whose evaluation the result reports.
	Selected  int     `json:"selected_epoch,omitempty"`
	TestAcc   float64 `json:"test_accuracy,omitempty"`
	TrainLoss float64 `json:"train_loss,omitempty"`
	ValLoss   float64 `json:"val_loss,omitempty"`
	// exported: the number of files the export wrote, the card included.
	Files int `json:"files,omitempty"`
}
