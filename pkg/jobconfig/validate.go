package jobconfig

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Validate checks every field of cfg and returns all problems at once, each
// naming its field, joined and wrapping ErrInvalid (or ErrVersion).
func (cfg *RunConfig) Validate() error {
	if cfg.Version != Version {
		return fmt.Errorf("%w: version %d, want %d", ErrVersion, cfg.Version, Version)
	}
	var v validator
	v.nonEmpty("job.name", cfg.Job.Name)
	v.nonEmpty("job.namespace", cfg.Job.Namespace)
	cfg.Dataset.validate(&v)
	if cfg.Partitions != nil {
		cfg.Partitions.validate(&v, "partitions")
	}
	cfg.Model.validate(&v)
	cfg.Training.validate(&v)
	v.inRange("graphServers.replicas", cfg.GraphServers.Replicas, Limits.GraphServers)
	v.port("graphServers.port", cfg.GraphServers.Port)
	v.check(cfg.GraphServers.DeadAfter == 0 || time.Duration(cfg.GraphServers.DeadAfter) >= MinDeadAfter && time.Duration(cfg.GraphServers.DeadAfter) <= MaxDeadAfter,
		"graphServers.deadAfter", "must be 0 (the default) or in [%v, %v], got %v", MinDeadAfter, MaxDeadAfter, cfg.GraphServers.DeadAfter)
	v.check(len(cfg.GraphServers.Peers) == cfg.GraphServers.Replicas, "graphServers.peers", "has %d addresses for %d replicas", len(cfg.GraphServers.Peers), cfg.GraphServers.Replicas)
	for i, p := range cfg.GraphServers.Peers {
		v.nonEmpty(fmt.Sprintf("graphServers.peers[%d]", i), p)
	}
	if cfg.Inference == nil { // an inference has no parameter servers
		v.inRange("parameterServers.replicas", cfg.ParameterServers.Replicas, Limits.ParameterServers)
		v.port("parameterServers.port", cfg.ParameterServers.Port)
		v.nonEmpty("parameterServers.service", cfg.ParameterServers.Service)
	}
	v.check(len(cfg.ParameterServers.Shards) == cfg.ParameterServers.Replicas, "parameterServers.shards", "has %d addresses for %d replicas", len(cfg.ParameterServers.Shards), cfg.ParameterServers.Replicas)
	for i, s := range cfg.ParameterServers.Shards {
		v.nonEmpty(fmt.Sprintf("parameterServers.shards[%d]", i), s)
	}
	cfg.Backend.validate(&v)
	v.check((cfg.Security.TLSDir != "") != cfg.Security.Insecure, "security", "must set exactly one of tlsDir, insecure")
	if k := cfg.Backend.Knative; k != nil && !cfg.Security.Insecure {
		v.check(k.TokenFile != "", "backend.knative.tokenFile", "is required unless security.insecure")
	}
	cfg.validateCost(&v)
	if cfg.Checkpoint != nil {
		c := cfg.Checkpoint
		v.inRange("checkpoint.intervalEpochs", c.IntervalEpochs, Limits.CheckpointInterval)
		v.zeroOrInRange("checkpoint.keep", c.Keep, Range{1, Limits.Epochs.Max}, "all")
		v.check((c.Path != "") != (c.S3 != nil), "checkpoint", "must set exactly one of path, s3")
		if c.S3 != nil {
			v.nonEmpty("checkpoint.s3.bucket", c.S3.Bucket)
		}
	}
	if cfg.Output != nil {
		cfg.Output.validate(&v, "output")
	}
	if cfg.Inference != nil {
		v.check(cfg.Output != nil, "output", "is required with inference")
		cfg.Inference.Model.validate(&v, "inference.model")
	}
	return v.err()
}

func (d *Dataset) validate(v *validator) {
	switch d.Source {
	case SourceBuiltin:
		v.nonEmpty("dataset.name", d.Name)
	case SourceS3:
		if v.check(d.S3 != nil, "dataset.s3", "is required for source %q", d.Source) {
			v.nonEmpty("dataset.s3.bucket", d.S3.Bucket)
		}
	case SourcePVC:
		v.nonEmpty("dataset.path", d.Path)
	case SourceHTTP:
		v.nonEmpty("dataset.url", d.URL)
	default:
		v.fail("dataset.source", "unknown source %q", d.Source)
	}
	if d.Source != SourceBuiltin {
		v.check(slices.Contains([]string{"", FormatPrepared, FormatText, FormatOGB, FormatNumPy}, d.Format), "dataset.format",
			"must be %q, %q, %q, %q or empty (detected), got %q", FormatPrepared, FormatText, FormatOGB, FormatNumPy, d.Format)
	}
}

func (m *Model) validate(v *validator) {
	v.check(ModelName(m.Architecture) != "", "model.architecture", "must be %q, %q or %q, got %q", ArchitectureGCN, ArchitectureGAT, ArchitectureSAGE, m.Architecture)
	v.inRange("model.layers", m.Layers, Limits.Layers)
	v.inRange("model.hidden", m.Hidden, Limits.Hidden)
	v.check(m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "must be in [0, 1), got %g", m.Dropout)
	if m.Architecture == ArchitectureGAT {
		v.check(Limits.Heads.Contains(m.Heads), "model.heads", "must be in %v for GAT, got %d", Limits.Heads, m.Heads)
	} else {
		v.check(m.Heads == 0, "model.heads", "applies only to GAT, got %d", m.Heads)
	}
}

func (t *Training) validate(v *validator) {
	v.inRange("training.epochs", t.Epochs, Limits.Epochs)
	v.check(t.LearningRate > 0, "training.learningRate", "must be greater than 0, got %g", t.LearningRate)
	v.check(t.WeightDecay >= 0, "training.weightDecay", "must not be negative, got %g", t.WeightDecay)
	v.check(t.TargetAccuracy >= 0 && t.TargetAccuracy <= 1, "training.targetAccuracy", "must be in [0, 1], got %g", t.TargetAccuracy)
	v.check(Limits.Staleness.Contains(t.Staleness.bound), "training.staleness", "must be in %v, got %d", Limits.Staleness, t.Staleness.bound)
	v.zeroOrInRange("training.evalEvery", t.EvalEvery, Range{1, Limits.Epochs.Max}, "every epoch")
	v.zeroOrInRange("training.patience", t.Patience, Range{1, Limits.Epochs.Max}, "off")
	v.check(t.Patience == 0 || t.EvalEvery <= 1, "training.patience", "needs evaluation every epoch (evalEvery 1), got evalEvery %d", t.EvalEvery)
	v.zeroOrInRange("training.intervals", t.Intervals, Limits.Intervals, "the backend's concurrency")
}

func (b *Backend) validate(v *validator) {
	set := 0
	for _, p := range []bool{b.CPU != nil, b.Lambda != nil, b.Knative != nil} {
		if p {
			set++
		}
	}
	v.check(set == 1, "backend", "must set exactly one of cpu, lambda, knative, got %d", set)
	v.check(b.Placement == "" || b.Placement == PlacementAuto || b.Placement == PlacementRemote, "backend.placement",
		"must be %q, %q or empty, got %q", PlacementAuto, PlacementRemote, b.Placement)
	switch b.Kind {
	case BackendCPU:
		if v.check(b.CPU != nil, "backend.cpu", "is required for kind %q", b.Kind) {
			v.zeroOrInRange("backend.cpu.workers", b.CPU.Workers, Limits.Workers, "one per interval and epoch in flight")
			v.duration("backend.cpu.injectLatency", b.CPU.InjectLatency, MaxInjectLatency)
		}
	case BackendLambda:
		if v.check(b.Lambda != nil, "backend.lambda", "is required for kind %q", b.Kind) {
			l := b.Lambda
			v.nonEmpty("backend.lambda.functionName", l.FunctionName)
			v.nonEmpty("backend.lambda.region", l.Region)
			v.inRange("backend.lambda.memoryMB", l.MemoryMB, Limits.LambdaMemoryMB)
			v.inRange("backend.lambda.maxConcurrency", l.MaxConcurrency, Limits.Concurrency)
			v.check(l.DataPath == DataPathPull || l.DataPath == DataPathInline, "backend.lambda.dataPath", "must be %q or %q, got %q", DataPathPull, DataPathInline, l.DataPath)
			l.Calls.validate(v, "backend.lambda.calls")
		}
	case BackendKnative:
		if v.check(b.Knative != nil, "backend.knative", "is required for kind %q", b.Kind) {
			v.nonEmpty("backend.knative.url", b.Knative.URL)
			v.inRange("backend.knative.maxConcurrency", b.Knative.MaxConcurrency, Limits.Concurrency)
			dp := b.Knative.DataPath
			v.check(dp == "" || dp == DataPathPull || dp == DataPathInline, "backend.knative.dataPath", "must be %q, %q or empty, got %q", DataPathPull, DataPathInline, dp)
			b.Knative.Calls.validate(v, "backend.knative.calls")
		}
	default:
		v.fail("backend.kind", "unknown kind %q", b.Kind)
	}
}

func (c *Calls) validate(v *validator, field string) {
	if c == nil {
		return
	}
	v.zeroOrInRange(field+".endpointConcurrency", c.EndpointConcurrency, Limits.Concurrency, "any")
	v.duration(field+".timeout", c.Timeout, MaxCallTimeout)
	v.duration(field+".stragglerFloor", c.StragglerFloor, MaxCallTimeout)
}

// validator collects field errors.
type validator struct{ errs []error }

func (v *validator) fail(field, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%w: %s %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
}

func (v *validator) check(ok bool, field, format string, args ...any) bool {
	if !ok {
		v.fail(field, format, args...)
	}
	return ok
}

func (v *validator) nonEmpty(field, value string) {
	v.check(value != "", field, "must not be empty")
}

func (v *validator) port(field string, p int) {
	v.check(p >= 1 && p <= 65535, field, "must be a port in [1, 65535], got %d", p)
}

func (v *validator) err() error { return errors.Join(v.errs...) }
