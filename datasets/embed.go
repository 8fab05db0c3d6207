// Package datasets ships the benchmark graphs the project tests on, in the plain-text format of
// FORMAT.md, and embeds Cora so that `dorylus train` runs with no files at all.
package datasets

import "embed"

// Cora is the Cora citation graph (Planetoid split), the default training dataset.
//
//go:embed cora
var Cora embed.FS
