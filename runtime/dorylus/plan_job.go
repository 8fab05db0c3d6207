package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/plan/jobfile"
)

// applyJob sets the planner's flags the user did not set from job m (jobfile.Job.Apply) and
// its backend alone, which a --backends naming another contradicts; a job's servers are not
// local.
func (o *planOptions) applyJob(m jobfile.Job, flags *pflag.FlagSet) error {
	in := jobfile.Inputs{Dataset: o.dataset, Model: o.model, Layers: o.layers, Hidden: o.hidden, Heads: o.heads,
		Epochs: o.epochs, ParamServers: o.paramServers, Budget: o.budget, Deadline: o.deadline,
		Staleness: o.staleness, UpdateEvery: o.updateEvery, Placement: o.placement}
	if err := m.Apply(&in, flags.Changed); err != nil {
		return err
	}
	o.dataset, o.model, o.layers, o.hidden, o.heads = in.Dataset, in.Model, in.Layers, in.Hidden, in.Heads
	o.epochs, o.paramServers, o.budget, o.deadline = in.Epochs, in.ParamServers, in.Budget, in.Deadline
	o.staleness, o.updateEvery, o.placement = in.Staleness, in.UpdateEvery, in.Placement
	b := m.Backend()
	if flags.Changed("backends") && (len(o.backends) != 1 || o.backends[0] != string(b)) {
		return fmt.Errorf("--backends %s with --job: the job's tensor backend is %s, the only one it has the settings of", strings.Join(o.backends, ","), b)
	}
	if flags.Changed("local") && o.local {
		return fmt.Errorf("--local with --job: a job's servers run on their own nodes")
	}
	o.backends = []string{string(b)}
	return nil
}

// runPlanJob plans the job of --job: the table to stderr, the manifest with the choice to
// stdout; no configuration meeting the goal is an error.
func runPlanJob(o planOptions, flags *pflag.FlagSet, stdout, stderr io.Writer) error {
	if o.json {
		return fmt.Errorf("--json with --job: the manifest is the output")
	}
	m, err := jobfile.Read(o.job)
	if err != nil {
		return err
	}
	if err := o.applyJob(m, flags); err != nil {
		return err
	}
	in, opts, best, err := o.choose()
	if err != nil {
		return err
	}
	writePlanTable(stderr, in.workload, in.goal, in.cal, best, opts, o.top)
	if !best {
		return fmt.Errorf("no configuration of the job's %s backend meets its goal", m.Backend())
	}
	out, err := m.WithChoice(opts[0].Config)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
