package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: "dorylus.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types in this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource is the plural resource name of GNNTrainingJob.
const Resource = "gnntrainingjobs"

// GroupVersionResource is the resource of GNNTrainingJob, for dynamic clients.
var GroupVersionResource = GroupVersion.WithResource(Resource)
