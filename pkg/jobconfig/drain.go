package jobconfig

import "time"

// A run with checkpoints is preempted by its servers' SIGTERM (a node's notice, a deleted
// pod): the graph servers drain it to an epoch boundary within the drain timeout (the servers'
// --drain-timeout) and the parameter servers save that boundary once no graph server remains.
// The operator gives the pods the time this takes (terminationGracePeriodSeconds).

// DefaultDrainTimeout bounds a preemption's drain when --drain-timeout is not given: within
// the 30 s a pod is given after SIGTERM by default, with time left for a small checkpoint.
const DefaultDrainTimeout = 20 * time.Second

// MaxDrainTimeout bounds --drain-timeout: a node's notice of its preemption comes minutes
// before, at most.
const MaxDrainTimeout = time.Hour

// DrainExit is how long a preempted parameter server waits, beyond the drain timeout, for the
// graph servers to exit once drained (their messages in flight, their reports) before it saves.
const DrainExit = 5 * time.Second
