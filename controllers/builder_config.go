package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// defaultGATHeads is the head count of a GAT whose spec leaves it unset.
const defaultGATHeads = 8

// peerDeadAfter is how long a job's server may miss its health checks before
// its peers give up on it. The operator sees a dead container in its pod's
// status within a second and restarts the job (restarts.go); the checks only
// catch a hung or unreachable server, and a live one on a busy node missed
// them for 4.1 s (2 cores at load 30).
const peerDeadAfter = jobconfig.Duration(15 * time.Second)

// Secret purposes: the folder under jobconfig.SecretsDir each Secret is
// mounted at.
const (
	secretLambda     = "lambda"
	secretDataset    = "dataset"
	secretCheckpoint = "checkpoint"
	// secretFunctionToken holds the token of a user-deployed Knative function.
	secretFunctionToken = "function-token"
)

func secretDir(purpose string) string { return path.Join(jobconfig.SecretsDir, purpose) }

// resolveRunConfig turns a job's spec into the run config its pods read:
// defaults applied, decimals parsed, addresses spelled out, the cost
// section priced by pricing. It is pure.
func resolveRunConfig(job *dorylusv1alpha1.GNNTrainingJob, pricing *Pricing) (*jobconfig.RunConfig, error) {
	s := &job.Spec
	p := decimalParser{}
	cfg := &jobconfig.RunConfig{
		Version: jobconfig.Version,
		Job:     jobconfig.JobRef{Name: job.Name, Namespace: job.Namespace, UID: string(job.UID)},
		Model: jobconfig.Model{
			Architecture: string(s.Model.Architecture),
			Layers:       int(s.Model.Layers),
			Hidden:       int(s.Model.Hidden),
			Dropout:      p.parse("spec.model.dropout", s.Model.Dropout),
		},
		Training: jobconfig.Training{
			Epochs:       int(s.Training.Epochs),
			LearningRate: p.parse("spec.training.learningRate", s.Training.LearningRate),
			WeightDecay:  p.parse("spec.training.weightDecay", s.Training.WeightDecay),
			Seed:         s.Training.Seed,
		},
	}
	if s.Model.Architecture == dorylusv1alpha1.ArchitectureGAT {
		cfg.Model.Heads = defaultGATHeads
		if s.Model.Heads != nil {
			cfg.Model.Heads = int(*s.Model.Heads)
		}
	}
	if s.Training.TargetAccuracy != nil {
		cfg.Training.TargetAccuracy = p.parse("spec.training.targetAccuracy", *s.Training.TargetAccuracy)
	}
	staleness, err := jobconfig.ParseStaleness(s.Training.Staleness.String()) // the CRD admits "sync" or 0..16
	if err != nil {
		return nil, fmt.Errorf("spec.training.staleness: %w", err)
	}
	cfg.Training.Staleness = staleness
	if s.Training.Intervals != nil {
		cfg.Training.Intervals = int(*s.Training.Intervals)
	}
	if u := s.Training.UpdateEvery; u != "" {
		if cfg.Training.UpdateEvery, err = jobconfig.ParseUpdateEvery(u); err != nil { // the CRD admits epoch, interval or 1..65536
			return nil, fmt.Errorf("spec.training.updateEvery: %w", err)
		}
	}
	cfg.Dataset = resolveDataset(&s.Dataset)
	cfg.Partitions = resolvePartitions(job)

	gs := graphServerName(job)
	cfg.GraphServers = jobconfig.GraphServers{Replicas: int(s.GraphServers.Replicas), Port: jobconfig.GraphServerPort, DeadAfter: peerDeadAfter}
	for i := int32(0); i < s.GraphServers.Replicas; i++ {
		cfg.GraphServers.Peers = append(cfg.GraphServers.Peers,
			fmt.Sprintf("%s-%d.%s.%s.svc:%d", gs, i, gs, job.Namespace, jobconfig.GraphServerPort))
	}
	ps := paramServiceName(job)
	if s.Inference == nil {
		cfg.ParameterServers = jobconfig.ParameterServers{
			Replicas: int(s.ParameterServers.Replicas),
			Port:     jobconfig.ParamServerPort,
			Service:  fmt.Sprintf("%s.%s.svc:%d", ps, job.Namespace, jobconfig.ParamServerPort),
		}
	} else {
		cfg.Inference = &jobconfig.Inference{Model: resolveLocation(&s.Inference.Model, jobconfig.ModelMountPath, secretModel)}
	}
	if o := s.Output; o != nil {
		l := resolveLocation(&o.OutputLocation, jobconfig.OutputMountPath, secretOutput)
		cfg.Output, cfg.OverwriteOutput = &l, o.Overwrite
	}
	for n := int32(0); n < paramShards(job); n++ {
		cfg.ParameterServers.Shards = append(cfg.ParameterServers.Shards,
			fmt.Sprintf("%s.%s.%s.svc:%d", paramShardName(job, n), ps, job.Namespace, jobconfig.ParamServerPort))
	}
	cfg.Backend = resolveBackend(job)
	cfg.Security = jobconfig.Security{TLSDir: jobconfig.CredentialsDir}
	if c := s.Checkpoint; c != nil {
		// The job's own folder under the destination, named by its UID: a job recreated with
		// the same name, or another job on the same prefix, never reads or prunes these.
		run := string(job.UID)
		cfg.Checkpoint = &jobconfig.Checkpoint{IntervalEpochs: int(c.IntervalEpochs), RunID: run}
		if c.PVC != nil {
			cfg.Checkpoint.Path = path.Join(jobconfig.CheckpointMountPath, c.PVC.Path, jobconfig.RunFolder(run))
		}
		if c.S3 != nil {
			cfg.Checkpoint.S3 = resolveS3(c.S3, secretCheckpoint)
			cfg.Checkpoint.S3.Prefix = path.Join(c.S3.Prefix, jobconfig.RunFolder(run))
		}
	}
	budget := 0.0
	if b := s.RunPolicy.BudgetUSD; b != nil {
		budget = p.parse("spec.runPolicy.budgetUSD", *b)
	}
	cfg.Cost = pricing.costSection(job, budget)
	if p.err != nil {
		return nil, p.err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func resolveDataset(d *dorylusv1alpha1.DatasetSource) jobconfig.Dataset {
	out := jobconfig.Dataset{Format: strings.ToLower(string(d.Format))}
	switch {
	case d.Builtin != nil:
		out = jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: d.Builtin.Name}
	case d.S3 != nil:
		out.Source = jobconfig.SourceS3
		out.S3 = resolveS3(d.S3, secretDataset)
	case d.PVC != nil:
		out.Source = jobconfig.SourcePVC
		out.Path = path.Join(jobconfig.DatasetMountPath, d.PVC.Path)
	case d.HTTP != nil:
		out.Source = jobconfig.SourceHTTP
		out.URL = d.HTTP.URL
		out.SHA256 = d.HTTP.SHA256
	}
	return out
}

func resolveS3(l *dorylusv1alpha1.S3Location, purpose string) *jobconfig.S3 {
	out := &jobconfig.S3{Bucket: l.Bucket, Prefix: l.Prefix, Region: l.Region, Endpoint: l.Endpoint}
	if l.SecretRef != nil {
		out.CredentialsDir = secretDir(purpose)
	}
	return out
}

func resolveBackend(job *dorylusv1alpha1.GNNTrainingJob) jobconfig.Backend {
	c := resolveBackendKind(job)
	if job.Spec.Backend().Placement == dorylusv1alpha1.PlacementRemote {
		c.Placement = jobconfig.PlacementRemote
	}
	return c
}

// resolveBackendKind returns resolveBackend's backend but its placement.
func resolveBackendKind(job *dorylusv1alpha1.GNNTrainingJob) jobconfig.Backend {
	b := job.Spec.Backend()
	switch {
	case b.Lambda != nil:
		l := &jobconfig.Lambda{
			FunctionName:   b.Lambda.FunctionName,
			Region:         b.Lambda.Region,
			MemoryMB:       int(b.Lambda.MemoryMB),
			MaxConcurrency: int(b.Lambda.MaxConcurrency),
			DataPath:       strings.ToLower(string(b.Lambda.DataPath)),
			Endpoint:       b.Lambda.Endpoint,
		}
		if b.Lambda.Credentials.SecretRef != nil {
			l.CredentialsDir = secretDir(secretLambda)
		}
		return jobconfig.Backend{Kind: jobconfig.BackendLambda, Lambda: l}
	case b.Knative != nil:
		k := &jobconfig.Knative{URL: b.Knative.URL, MaxConcurrency: int(b.Knative.MaxConcurrency)}
		if b.Knative.TokenSecretRef != nil {
			k.TokenFile = path.Join(secretDir(secretFunctionToken), pki.TokenFile)
		}
		if b.Knative.Service != nil {
			k.URL = fmt.Sprintf("http://%s.%s.svc.cluster.local", knativeServiceName(job), job.Namespace)
			k.Managed = true
			k.TokenFile = credentialsFile(pki.TokenFile)
		}
		return jobconfig.Backend{Kind: jobconfig.BackendKnative, Knative: k}
	default:
		c := &jobconfig.CPU{}
		if b.CPU != nil && b.CPU.Workers != nil {
			c.Workers = int(*b.CPU.Workers)
		}
		return jobconfig.Backend{Kind: jobconfig.BackendCPU, CPU: c}
	}
}

// decimalParser parses API decimals, keeping the first error.
type decimalParser struct{ err error }

func (p *decimalParser) parse(field string, d dorylusv1alpha1.Decimal) float64 {
	f, err := strconv.ParseFloat(string(d), 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("%s: %q is not a decimal number", field, d)
	}
	return f
}

// buildConfigMap is the job's ConfigMap holding run.json.
func buildConfigMap(job *dorylusv1alpha1.GNNTrainingJob, runJSON []byte) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(configMapName(job), job.Namespace).
		WithLabels(childLabels(job, RoleRuntime)).
		WithOwnerReferences(ownerReference(job)).
		WithData(map[string]string{jobconfig.ConfigMapKey: string(runJSON)})
}

// configDigest is the digest of cfg but its cost section (pricing.go),
// stamped on pod templates so that the servers restart when it changes.
func configDigest(cfg *jobconfig.RunConfig) (string, error) {
	c := *cfg
	c.Cost = nil
	data, err := jobconfig.Marshal(&c)
	if err != nil {
		return "", err
	}
	return configHash(data), nil
}

// configHash is a short digest of a run.json.
func configHash(runJSON []byte) string {
	sum := sha256.Sum256(runJSON)
	return hex.EncodeToString(sum[:8])
}
