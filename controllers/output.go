package controllers

import (
	"path"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Outputs and inference: spec.output is where graph servers write the model and every
// vertex's outputs at the end; spec.inference runs a saved model on graph servers only.

// Secret purposes and volumes of the output and the inference model.
const (
	secretOutput = "output"
	secretModel  = "model"
	volumeOutput = "output"
	volumeModel  = "model"
)

// resolveLocation returns a folder of the spec as the run config locates it: under mountPath
// for a pvc, with the Secret of purpose for S3 credentials.
func resolveLocation(l *dorylusv1alpha1.OutputLocation, mountPath, purpose string) jobconfig.Location {
	if l.PVC != nil {
		return jobconfig.Location{Path: path.Join(mountPath, l.PVC.Path)}
	}
	return jobconfig.Location{S3: resolveS3(l.S3, purpose)}
}

// paramShards is the number of parameter-server shards the job runs: none for an inference.
func paramShards(job *dorylusv1alpha1.GNNTrainingJob) int32 {
	if job.Spec.Inference != nil {
		return 0
	}
	return job.Spec.ParameterServers.Replicas
}

// outputVolumes returns the volumes and mounts graph servers need for spec.output (read-write)
// and an inference's model (read-only).
func outputVolumes(job *dorylusv1alpha1.GNNTrainingJob) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	var vs []*corev1ac.VolumeApplyConfiguration
	var ms []*corev1ac.VolumeMountApplyConfiguration
	add := func(l *dorylusv1alpha1.OutputLocation, volume, mountPath, purpose string, readOnly bool) {
		if l.PVC != nil {
			v, m := pvcVolume(volume, l.PVC.ClaimName, mountPath, readOnly)
			vs, ms = append(vs, v), append(ms, m)
		}
		if l.S3 != nil && l.S3.SecretRef != nil {
			v, m := secretVolume(purpose, l.S3.SecretRef.Name)
			vs, ms = append(vs, v), append(ms, m)
		}
	}
	if o := job.Spec.Output; o != nil {
		add(&o.OutputLocation, volumeOutput, jobconfig.OutputMountPath, secretOutput, false)
	}
	if in := job.Spec.Inference; in != nil {
		add(&in.Model, volumeModel, jobconfig.ModelMountPath, secretModel, true)
	}
	return vs, ms
}

// outputURIs returns the URIs of the files graph server 0 reported written to spec.output.
func outputURIs(job *dorylusv1alpha1.GNNTrainingJob) []string {
	o, p := job.Spec.Output, job.Status.Progress
	if o == nil || p == nil || len(p.Outputs) == 0 {
		return nil
	}
	base := ""
	switch {
	case o.S3 != nil:
		base = "s3://" + path.Join(o.S3.Bucket, o.S3.Prefix)
	case o.PVC != nil:
		base = "pvc://" + path.Join(o.PVC.ClaimName, o.PVC.Path)
	}
	out := make([]string, len(p.Outputs))
	for i, name := range p.Outputs {
		out[i] = base + "/" + name
	}
	return out
}

// outputsWritten reports whether a job that writes outputs has reported them all (true for a
// job without spec.output): until then neither the last epoch nor the target accuracy ends it.
func outputsWritten(job *dorylusv1alpha1.GNNTrainingJob) bool {
	p := job.Status.Progress
	return job.Spec.Output == nil || (p != nil && len(p.Outputs) > 0)
}
