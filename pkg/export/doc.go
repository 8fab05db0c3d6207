// Package export writes and reads a trained model and its per-vertex outputs: the parameters as
// safetensors (layers.{l}.weight [in, out], layers.{l}.bias [out] where the model has one, and
// for GAT layers.{l}.att_src and layers.{l}.att_dst [heads, out-per-head]), a model card
// (model.json) describing the architecture, the normalisations, the data and the accuracies, and
// predictions and embeddings as .npy arrays in vertex-id order.
//
// Every file goes to a checkpoint.Store (a folder or an S3 prefix) whole; the card, or for a
// prediction run its manifest, is published last and lists every other file with its size and
// SHA-256, so a reader refuses a truncated or corrupted file with an error saying which.
package export
