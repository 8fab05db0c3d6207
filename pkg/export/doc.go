// Package export writes and reads a trained model and its per-vertex outputs: the parameters as
// safetensors (layers.{l}.weight [in, out], layers.{l}.bias [out] where the model has one, and
// for GAT layers.{l}.att_src and layers.{l}.att_dst [heads, out-per-head]), a model card
// (model.json) describing the architecture, the normalisations, the data and the accuracies, and
// predictions and embeddings as .npy arrays in vertex-id order.
//
// Every file goes to a checkpoint.Store (a folder or an S3 prefix) whole; the card, or for a
// prediction run its manifest, is published last and lists every other file with its size and
// SHA-256, so a reader refuses a truncated or corrupted file with an error saying which.
//
// Written to a Target (Begin), an export is a new version of its location: its files go to the
// version's folder v-RUN-N beside the old version's, and the card or manifest, written last at
// the top of the location, names the version, switching readers to it in one step; the older
// version is deleted after. A location holding another run's export is replaced only when asked.
package export
