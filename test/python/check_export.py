#!/usr/bin/env python3
"""Check a model exported by `dorylus train --output-dir` against an independent PyTorch forward pass.

Uses only the standard library, NumPy and PyTorch (Debian's python3-numpy and python3-torch). It
reads the dataset in the plain-text format of datasets/FORMAT.md, the model card, and the
safetensors weights by hand (8-byte little-endian header length, JSON header, raw data), checks
every file against the sizes and SHA-256 sums the card lists, runs the GCN, GAT or GraphSAGE forward
pass the card describes in float64, and requires that:

  * argmax of the PyTorch logits equals the exported class on at least 99.9 % of the vertices,
  * the exported class probabilities are within 1e-4 of the PyTorch softmax,
  * the exported embeddings (the input of the last layer) are within 1e-4 (relative to their scale),
  * the exported classes equal the argmax of the exported probabilities, and
  * the test accuracy of the exported classes equals the accuracy the card reports.

The per-vertex outputs of a distributed run (one set of files per partition, listed in
partitions.json) are merged into vertex-id order by each partition's vertices.npy first.
With --predictions DIR it checks the output of `dorylus predict` the same way (against predict.json).
Exit status 0 when every check passes, 1 with a message otherwise.

    python3 check_export.py --dataset datasets/cora --model /tmp/model [--predictions /tmp/pred]
"""

import argparse
import warnings
import gzip
import hashlib
import json
import os
import struct
import sys

import numpy as np
import torch

warnings.filterwarnings("ignore", message="scatter_reduce")  # beta in torch 1.13, stable since


class CheckFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def verify_files(folder, listing):
    """Check the size and SHA-256 of every file a card or manifest lists."""
    for f in listing["files"]:
        path = os.path.join(folder, f["name"])
        with open(path, "rb") as fh:
            data = fh.read()
        check(len(data) == f["bytes"], f"{path}: {len(data)} bytes, the listing says {f['bytes']}")
        check(hashlib.sha256(data).hexdigest() == f["sha256"], f"{path}: SHA-256 differs from the listing")


def read_safetensors(path):
    """Parse a safetensors file by hand: u64 header length, JSON header, raw little-endian data."""
    with open(path, "rb") as fh:
        data = fh.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    body = data[8 + n :]
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        check(e["dtype"] == "F32", f"{name}: dtype {e['dtype']}")
        lo, hi = e["data_offsets"]
        arr = np.frombuffer(body[lo:hi], dtype="<f4")
        check(arr.size == int(np.prod(e["shape"], dtype=np.int64)), f"{name}: {arr.size} values for shape {e['shape']}")
        tensors[name] = torch.from_numpy(arr.reshape(e["shape"]).astype(np.float64))
    return tensors


def read_ids(path):
    with open(path) as fh:
        return np.array([int(line) for line in fh if line.strip()], dtype=np.int64)


def load_dataset(folder, row_normalise):
    """Load a dataset folder (datasets/FORMAT.md): edges, features, labels and the test split."""
    with open(os.path.join(folder, "meta.json")) as fh:
        meta = json.load(fh)
    n, f = meta["num_nodes"], meta["num_features"]
    edge_path = os.path.join(folder, meta.get("edge_file", "edges.txt"))
    opener = gzip.open if edge_path.endswith(".gz") else open
    with opener(edge_path, "rt") as fh:
        edges = np.loadtxt(fh, dtype=np.int64, ndmin=2)
    x = np.zeros((n, f), dtype=np.float64)
    with gzip.open(os.path.join(folder, "features.txt.gz"), "rt") as fh:
        for i, line in enumerate(fh):
            for tok in line.split():
                c, v = tok.split(":")
                x[i, int(c)] = np.float32(v)
    if row_normalise:
        s = x.sum(axis=1, keepdims=True)
        x = np.where(s != 0, x / np.where(s != 0, s, 1), x)
    labels = read_ids(os.path.join(folder, "labels.txt"))
    test = read_ids(os.path.join(folder, "test.txt"))
    return torch.from_numpy(x), torch.from_numpy(edges), labels, test, n


def with_self_loops(edges, n):
    """Source and destination of every edge of A + I (edges are src dst pairs, both directions listed)."""
    loops = torch.arange(n, dtype=torch.int64)
    src = torch.cat([edges[:, 0], loops])
    dst = torch.cat([edges[:, 1], loops])
    return src, dst


def gcn_forward(card, w, x, edges, n):
    """Kipf's GCN: Z_l = Â (σ(Z_{l-1}) W_l), Â = D^-1/2 (A + I) D^-1/2, σ = ReLU (identity on the features)."""
    src, dst = with_self_loops(edges, n)
    deg = torch.zeros(n, dtype=torch.float64).index_add_(0, dst, torch.ones(dst.shape[0], dtype=torch.float64))
    dinv = deg.pow(-0.5)
    adj = torch.sparse_coo_tensor(torch.stack([dst, src]), dinv[dst] * dinv[src], (n, n)).coalesce()
    h, emb = x, None
    for l in range(card["layers"]):
        if l > 0:
            h = torch.relu(h)
        if l == card["layers"] - 1:
            emb = h if l > 0 else None
        h = torch.sparse.mm(adj, h @ w[f"layers.{l}.weight"])
    return h, emb


def gat_forward(card, w, x, edges, n):
    """GAT: per head, α_ij = softmax over i's in-edges of LeakyReLU_0.2(a_dst·Wh_i + a_src·Wh_j),
    Z_i = Σ_j α_ij W h_j; hidden heads concatenated, output heads averaged, bias after the heads,
    ELU between layers."""
    src, dst = with_self_loops(edges, n)
    h, emb, prev_bias = x, None, None
    for l in range(card["layers"]):
        if l > 0:
            h = torch.nn.functional.elu(h + prev_bias)
        if l == card["layers"] - 1:
            emb = h if l > 0 else None
        a_src, a_dst = w[f"layers.{l}.att_src"], w[f"layers.{l}.att_dst"]
        heads, fdim = a_src.shape
        p = (h @ w[f"layers.{l}.weight"]).reshape(n, heads, fdim)
        s_src, s_dst = (p * a_src).sum(-1), (p * a_dst).sum(-1)
        e = torch.nn.functional.leaky_relu(s_dst[dst] + s_src[src], 0.2)
        m = torch.full((n, heads), -float("inf"), dtype=torch.float64).scatter_reduce(
            0, dst[:, None].expand(-1, heads), e, reduce="amax", include_self=True)
        ex = torch.exp(e - m[dst])
        alpha = ex / torch.zeros(n, heads, dtype=torch.float64).index_add_(0, dst, ex)[dst]
        z = torch.zeros(n, heads, fdim, dtype=torch.float64).index_add_(0, dst, alpha[:, :, None] * p[src])
        prev_bias = w[f"layers.{l}.bias"]
        if l < card["layers"] - 1:
            h = z.reshape(n, heads * fdim)
        else:
            h = z.mean(1) + prev_bias
    return h, emb


def sage_forward(card, w, x, edges, n):
    """GraphSAGE, mean aggregator: Z_l = H W_self + M H W_neigh, M = D^-1 A the mean over each
    vertex's in-neighbours (no self loop, a vertex without any gets 0), H = ReLU(Z_{l-1}) (the
    features in layer 0)."""
    src, dst = edges[:, 0], edges[:, 1]
    deg = torch.zeros(n, dtype=torch.float64).index_add_(0, dst, torch.ones(dst.shape[0], dtype=torch.float64))
    mean = torch.sparse_coo_tensor(torch.stack([dst, src]), 1 / deg[dst], (n, n)).coalesce()
    h, emb = x, None
    for l in range(card["layers"]):
        if l > 0:
            h = torch.relu(h)
        if l == card["layers"] - 1:
            emb = h if l > 0 else None
        h = h @ w[f"layers.{l}.weight_self"] + torch.sparse.mm(mean, h @ w[f"layers.{l}.weight_neigh"])
    return h, emb


FORWARD = {"gcn": gcn_forward, "gat": gat_forward, "sage": sage_forward}


class Exported(torch.nn.Module):
    """An exported GCN, GAT or GraphSAGE as a PyTorch module: its safetensors tensors are the
    module's parameters (float64, by their export names with '.' written '_'), and
    forward(x, edges) returns the logits and the embeddings (None for one layer) that
    `dorylus predict` writes, softmax(logits) being probabilities.npy."""

    def __init__(self, card, tensors):
        super().__init__()
        self.card, self.names = card, list(tensors)
        for name, t in tensors.items():
            self.register_parameter(name.replace(".", "_"), torch.nn.Parameter(t, requires_grad=False))

    def forward(self, x, edges):
        w = {name: getattr(self, name.replace(".", "_")) for name in self.names}
        return FORWARD[self.card["architecture"]](self.card, w, x, edges, x.shape[0])


def load_module(folder):
    """Load the model `dorylus train --output-dir folder` wrote as an Exported module, after
    checking every file against the card."""
    with open(os.path.join(folder, "model.json")) as fh:
        card = json.load(fh)
    files = os.path.join(folder, card.get("version", ""))  # the version folder the card names
    verify_files(files, card)
    return Exported(card, read_safetensors(os.path.join(files, "model.safetensors")))


def load_npy(folder, name):
    """Load one output array; from a distributed run (partitions.json), merge the partitions'
    files into vertex-id order by each partition's vertices.npy."""
    index = os.path.join(folder, "partitions.json")
    if not os.path.exists(index):
        return np.load(os.path.join(folder, name), allow_pickle=False)
    with open(index) as fh:
        idx = json.load(fh)
    key = name.removesuffix(".npy")
    merged, seen = None, np.zeros(idx["nodes"], dtype=bool)
    for part in idx["partitions"]:
        ids = np.load(os.path.join(folder, part["vertices"]), allow_pickle=False)
        rows = np.load(os.path.join(folder, part[key]), allow_pickle=False)
        check(ids.dtype == np.int32 and rows.shape[0] == ids.shape[0], f"{part[key]}: {rows.shape[0]} rows for {ids.shape[0]} vertices")
        if merged is None:
            merged = np.zeros((idx["nodes"],) + rows.shape[1:], dtype=rows.dtype)
        check(not seen[ids].any(), f"{part['vertices']}: a vertex listed twice")
        seen[ids] = True
        merged[ids] = rows
    check(seen.all(), f"{index}: {int((~seen).sum())} vertices in no partition")
    return merged


def has_output(folder, name):
    """Whether any file of output name was written (for a distributed run, any partition's)."""
    index = os.path.join(folder, "partitions.json")
    if os.path.exists(index):
        with open(index) as fh:
            return any(part.get(name.removesuffix(".npy")) for part in json.load(fh)["partitions"])
    return os.path.exists(os.path.join(folder, name))


def compare(folder, logits, emb, labels, test, want_test, what):
    """Compare the exported outputs in folder with the PyTorch logits and embeddings."""
    classes = load_npy(folder, "predictions.npy")
    probs = load_npy(folder, "probabilities.npy")
    check(classes.dtype == np.int32 and probs.dtype == np.float32, f"{what}: dtypes {classes.dtype}, {probs.dtype}")
    n = logits.shape[0]
    check(classes.shape == (n,) and probs.shape == tuple(logits.shape), f"{what}: shapes {classes.shape}, {probs.shape}")
    ref = torch.softmax(logits, dim=1).numpy()
    agree = float((ref.argmax(1) == classes).mean())
    diff = float(np.abs(ref - probs).max())
    check(agree >= 0.999, f"{what}: argmax agrees on {100 * agree:.3f}% of vertices, want >= 99.9%")
    check(diff <= 1e-4, f"{what}: probabilities differ by up to {diff:.3g}, want <= 1e-4")
    check((probs.argmax(1) == classes).all(), f"{what}: classes are not the argmax of the probabilities")
    emb_diff = 0.0
    if emb is not None:
        got = load_npy(folder, "embeddings.npy")
        check(got.dtype == np.float32 and got.shape == tuple(emb.shape), f"{what}: embeddings {got.dtype} {got.shape}")
        emb_diff = float(np.abs(got - emb.numpy()).max() / max(1.0, float(emb.abs().max())))
        check(emb_diff <= 1e-4, f"{what}: embeddings differ by up to {emb_diff:.3g} of their scale, want <= 1e-4")
    else:
        check(not has_output(folder, "embeddings.npy"), f"{what}: a one-layer model wrote embeddings")
    acc = float((classes[test] == labels[test]).mean())
    check(acc == want_test, f"{what}: the exported classes score {acc!r} on the test split, the card says {want_test!r}")
    print(f"{what}: argmax agreement {100 * agree:.3f}%, max probability difference {diff:.2e}, "
          f"max embedding difference {emb_diff:.2e}, test accuracy {100 * acc:.2f}% (card {100 * want_test:.2f}%)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True, help="dataset folder in the plain-text format")
    ap.add_argument("--model", required=True, help="folder written by dorylus train --output-dir")
    ap.add_argument("--predictions", help="folder written by dorylus predict on the same dataset")
    args = ap.parse_args()
    try:
        model = load_module(args.model)
        card, files = model.card, os.path.join(args.model, model.card.get("version", ""))
        rownorm = card["features"].startswith("row-sum")
        check(rownorm or card["features"] == "none", f"unknown feature normalisation {card['features']!r}")
        x, edges, labels, test, n = load_dataset(args.dataset, rownorm)
        check(card["dataset"]["nodes"] == n, f"the card's dataset has {card['dataset']['nodes']} nodes, {args.dataset} {n}")
        with torch.no_grad():
            logits, emb = model(x, edges)
        compare(files, logits, emb, labels, test, card["accuracy"]["test"], f"{card['architecture']} model")
        if args.predictions:
            with open(os.path.join(args.predictions, "predict.json")) as fh:
                manifest = json.load(fh)
            manifest["files"] = [f for f in manifest["files"] if f["name"] != "predict.json"]
            files = os.path.join(args.predictions, manifest.get("version", ""))
            verify_files(files, manifest)
            compare(files, logits, emb, labels, test, manifest["accuracy"]["test"], "predict")
    except CheckFailed as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
