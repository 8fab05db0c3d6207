#!/usr/bin/env python3
"""Reference GraphSAGE: full-batch training in PyTorch, written from the equations pkg/model uses.

Uses only the standard library, NumPy and PyTorch (Debian's python3-numpy and python3-torch), no
graph library. For each dataset folder (the plain-text format of datasets/FORMAT.md) it trains
`dorylus train --model sage`'s network for --seeds seeds and prints one JSON line per dataset with
the mean and standard deviation of the last epoch's test accuracy.

Model: layer l computes H_{l+1} = sigma(H_l W_self + M H_l W_neigh), M = D^-1 A the mean over each
vertex's in-neighbours (no self loop; edge weights ignored; a vertex without any gets 0), sigma =
ReLU between layers and none after the last, whose output is the logits. Dropout on every layer's
input (on the non-zeros of the sparse features in layer 0). Features row-normalised (each row
scaled to sum 1). W_self and W_neigh Glorot-uniform for their in x out shape; softmax
cross-entropy averaged over the training split; Adam (betas 0.9, 0.999, eps 1e-8) with L2 weight
decay on the first layer's weights only, as dorylus's GCN and GraphSAGE apply it.

    /usr/bin/python3 test/python/torch_sage.py --seeds 10 datasets/cora datasets/citeseer
"""

import argparse
import gzip
import json
import math
import os
import statistics
import sys

import numpy as np
import torch


def text(path):
    """Open a dataset file, plain or gzipped (path or path.gz)."""
    if os.path.exists(path):
        return gzip.open(path, "rt") if path.endswith(".gz") else open(path, "rt")
    return gzip.open(path + ".gz", "rt")


def ids(path):
    with text(path) as fh:
        return torch.tensor([int(x) for x in fh.read().split()], dtype=torch.int64)


def load(folder):
    """Features (sparse, row-normalised, float32), M (sparse), labels and the three splits."""
    with open(os.path.join(folder, "meta.json")) as fh:
        meta = json.load(fh)
    n, f = meta["num_nodes"], meta["num_features"]
    with text(os.path.join(folder, meta.get("edge_file", "edges.txt"))) as fh:
        edges = np.array(fh.read().split(), dtype=np.int64).reshape(-1, 2)
    with text(os.path.join(folder, "features.txt.gz")) as fh:
        lines = fh.read().splitlines()
    # Each line is a row's col:value tokens; parsed all at once (a token loop took 4 s of
    # Coauthor CS's 1.09M), values read as float32 as dorylus reads them.
    rows = np.repeat(np.arange(len(lines), dtype=np.int64), [line.count(":") for line in lines])
    tokens = " ".join(lines).replace(":", " ").split()
    cols = np.array(tokens[0::2], dtype=np.int64)
    vals = np.array(tokens[1::2], dtype=np.float32).astype(np.float64)
    sums = np.bincount(rows, weights=vals, minlength=n)
    vals = np.where(sums[rows] != 0, vals / np.where(sums[rows] != 0, sums[rows], 1), vals)
    x = torch.sparse_coo_tensor(torch.tensor(np.stack([rows, cols])),
                                torch.tensor(vals, dtype=torch.float32), (n, f)).coalesce()
    # edges.txt lists src dst pairs, both directions of an undirected edge; row dst of M averages
    # over dst's in-neighbours src, duplicates counted once.
    pairs = np.unique(edges[:, ::-1], axis=0)  # (dst, src)
    deg = np.bincount(pairs[:, 0], minlength=n).astype(np.float64)
    m = torch.sparse_coo_tensor(torch.tensor(pairs.T.copy()), torch.tensor(1.0 / deg[pairs[:, 0]], dtype=torch.float32), (n, n)).coalesce()
    labels = ids(os.path.join(folder, "labels.txt"))
    return x, m, labels, ids(os.path.join(folder, "train.txt")), ids(os.path.join(folder, "val.txt")), ids(os.path.join(folder, "test.txt"))


def glorot(fan_in, fan_out, gen):
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return ((torch.rand(fan_in, fan_out, generator=gen, dtype=torch.float32) * 2 - 1) * limit).requires_grad_()


def sparse_dropout(x, p, training):
    if not training or p == 0:
        return x
    keep = (torch.rand(x._nnz()) >= p).to(torch.float32) / (1 - p)
    return torch.sparse_coo_tensor(x._indices(), x._values() * keep, x.shape)


def forward(x, m, ws, dropout, training):
    h = sparse_dropout(x, dropout, training)
    for l, (w_self, w_neigh) in enumerate(ws):
        w = torch.cat([w_self, w_neigh], 1)  # one product for both halves: [H W_self | H W_neigh]
        if l == 0:
            sp = torch.sparse.mm(h, w)
        else:
            h = torch.nn.functional.dropout(torch.relu(h), dropout, training)
            sp = h @ w
        s, p = sp.split(w_self.shape[1], 1)
        h = s + torch.sparse.mm(m, p)
    return h


def train(data, seed, hidden, layers, dropout, lr, weight_decay, epochs):
    x, m, labels, tr, va, te = data
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    classes = int(labels.max()) + 1
    dims = [x.shape[1]] + [hidden] * (layers - 1) + [classes]
    ws = [(glorot(dims[l], dims[l + 1], gen), glorot(dims[l], dims[l + 1], gen)) for l in range(layers)]
    opt = torch.optim.Adam([{"params": list(ws[0]), "weight_decay": weight_decay}] +
                           [{"params": list(w), "weight_decay": 0.0} for w in ws[1:]], lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(x, m, ws, dropout, True)[tr], labels[tr])
        loss.backward()
        opt.step()
    with torch.no_grad():
        pred = forward(x, m, ws, dropout, False).argmax(1)
    return float((pred[te] == labels[te]).float().mean()), float((pred[va] == labels[va]).float().mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="+", help="dataset folders in the plain-text format")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for folder in args.datasets:
        data = load(folder)
        test = [train(data, s, args.hidden, args.layers, args.dropout, args.lr, args.weight_decay, args.epochs)[0]
                for s in range(1, args.seeds + 1)]
        print(json.dumps({"dataset": os.path.basename(os.path.normpath(folder)), "seeds": args.seeds,
                          "test_acc_mean": statistics.mean(test), "test_acc_std": statistics.pstdev(test)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
