// Package rpc holds the gRPC services of the data plane (dorylus.proto, generated into
// dorylus.pb.go and dorylus_grpc.pb.go by hack/gen-proto.sh) and what every server and client
// of them shares: connection settings that notice a dead peer within seconds, health watching,
// and the raw little-endian float32 encoding of tensor payloads.
//
// # Services
//
// GraphServer runs on every graph server. Hello checks that two graph servers belong to the
// same run and agree on the partitioning; PushRows carries one interval's rows for one peer
// (Scatter rows for the peer's ghost copies, backward-Gather contributions for the rows the
// peer owns, or the rows of an evaluation pass), batched, never per vertex; Progress reports
// finished tasks for the peer's scheduler; Command is the coordinator's (graph server 0)
// instruction to stop or evaluate; EpochDone and EvalDone are reports to the coordinator.
//
// ParamServer runs on every parameter-server shard. Init describes the model (every graph
// server sends it; they must agree); Pull returns the shard's layers at a weight version,
// waiting for it to exist; Push hands it an interval's gradients; Watch streams its versions.
// Pull and Push carry a Keep report, from which the shard learns which versions it may drop.
//
// TaskSource runs on a graph server whose tensor backend uses the pull data path: Inputs
// returns rows of a tensor task it has in flight, in the pkg/dispatch wire format, to the
// function its descriptor went to; the function pulls the task's weight from the ParamServer
// (Pull without a Keep report: the graph server has pinned the version).
//
// Every server also serves grpc.health.v1.Health, which peers Watch: a peer that stops
// answering is reported by name.
//
// # Tensor payloads
//
// Tensor.data and RowsBatch.rows are raw little-endian bytes with the shape in the message;
// Float32Bytes and Int32Bytes view a slice as such bytes without copying on little-endian
// hosts, DecodeFloat32s and DecodeInt32s copy them back, and Tensor.View reads a received
// tensor in place (the parameter servers' gradients, the graph servers' weights).
//
// Codec, the codec of NewServer's servers and Dial's clients, writes and reads plain protobuf
// without copying the bulk of the bytes more than it must: a RowsBatch or PushRequest goes out
// as views of the sender's rows between small headers; a RowsBatch comes in with its rows and
// data in buffers of the package's pool, which the server takes back when the handler returns
// (a handler copies them into place and keeps no view of them). The transport's frames and
// every other message are in that pool's buffers too, never zeroed, as each is written whole
// before it is read; what the pool holds is bounded by the messages in flight.
package rpc
