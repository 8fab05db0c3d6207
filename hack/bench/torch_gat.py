#!/usr/bin/python3
"""Reference peer: full-graph GAT (Velickovic et al. 2018) in PyTorch on CPU, plain tensor ops.

Trains the transductive GAT of the paper on datasets in the plain format of datasets/ (FORMAT.md)
for N seeds and prints the test accuracy (mean, std) and the median time of one training epoch:
forward + loss + backward + optimizer step, evaluation excluded.

Model, as `dorylus train --model gat` builds it: two attention layers; layer 1 has HEADS heads of
HIDDEN features, concatenated, then ELU; layer 2 has one head of C features. Per head,
e_ij = LeakyReLU(a_dst . W h_i + a_src . W h_j) (slope 0.2) over the in-edges of every vertex
i, self loops included; alpha = softmax over each vertex's in-edges after subtracting the
per-vertex maximum; h'_i = sum_j alpha_ij W h_j + bias. Dropout on both layers' inputs and on
alpha. Features row-normalised; Glorot-uniform weights per head; Adam with L2 weight decay on
every parameter. The attention is written with gathers (index_select), scatter_reduce and
index_add_, no graph library. Dropout masks come from torch.rand by default: torch 1.13's
F.dropout (bernoulli_, --dropout-impl bernoulli) makes an epoch 5-20x slower on these CPUs.

With --patience P it also applies the GAT paper's early stopping: evaluate every epoch, keep the
epoch with the best validation accuracy and loss, stop after P epochs without a new best on
either, and report the test accuracy of the kept epoch.

Example:
  /usr/bin/python3 hack/bench/torch_gat.py --root datasets --names cora,citeseer --seeds 10
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
warnings.filterwarnings("ignore", message=".*scatter_reduce.*")


def text(path):
    if os.path.exists(path):
        return open(path, "rt")
    return gzip.open(path + ".gz", "rt")


def ids(path):
    with text(path) as f:
        return torch.tensor([int(x) for x in f.read().split()], dtype=torch.int64)


def load(root, name):
    d = os.path.join(root, name)
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    n, nf = meta["num_nodes"], meta["num_features"]
    with text(os.path.join(d, "edges.txt")) as f:
        edges = np.array(f.read().split(), dtype=np.int64).reshape(-1, 2)
    rows, cols, vals = [], [], []
    with text(os.path.join(d, "features.txt")) as f:
        for i, line in enumerate(f):
            for tok in line.split():
                c, v = tok.split(":")
                rows.append(i)
                cols.append(int(c))
                vals.append(float(v))
    rows, cols, vals = np.array(rows), np.array(cols), np.array(vals, dtype=np.float64)
    total = np.bincount(rows, weights=vals, minlength=n)
    vals = vals / np.where(total == 0, 1, total)[rows]  # row-normalised
    with text(os.path.join(d, "labels.txt")) as f:
        labels = torch.tensor([int(x) for x in f.read().split()], dtype=torch.int64)
    split = [ids(os.path.join(d, p + ".txt")) for p in ("train", "val", "test")]
    return meta, n, nf, edges, (rows, cols, vals.astype(np.float32)), labels, split


class SparseFeatures:
    """Row-normalised sparse features with inverted dropout on the stored values."""

    def __init__(self, rows, cols, vals, n, nf):
        order = np.lexsort((cols, rows))
        self.idx = torch.from_numpy(np.stack([rows[order], cols[order]]))
        self.vals = torch.from_numpy(vals[order])
        self.shape = (n, nf)

    def matmul(self, w, p, training):
        v = self.vals
        if training and p > 0:
            v = v * ((torch.rand_like(v) >= p).to(v.dtype) / (1 - p))
        x = torch.sparse_coo_tensor(self.idx, v, self.shape)
        return torch.sparse.mm(x, w)


def dropout(x, p, training, impl):
    if not training or p == 0:
        return x
    if impl == "rand":
        return x * ((torch.rand_like(x) >= p).to(x.dtype) / (1 - p))
    return F.dropout(x, p, True)


class GATLayer(torch.nn.Module):
    def __init__(self, nin, heads, f, concat):
        super().__init__()
        self.heads, self.f, self.concat = heads, f, concat
        self.w = torch.nn.Parameter(torch.empty(nin, heads * f))
        for h in range(heads):
            torch.nn.init.xavier_uniform_(self.w.data[:, h * f:(h + 1) * f])
        self.a_dst = torch.nn.Parameter(torch.empty(heads, f))
        self.a_src = torch.nn.Parameter(torch.empty(heads, f))
        bound = (6.0 / (f + 1)) ** 0.5
        torch.nn.init.uniform_(self.a_dst, -bound, bound)
        torch.nn.init.uniform_(self.a_src, -bound, bound)
        self.bias = torch.nn.Parameter(torch.zeros(heads * f if concat else f))

    def forward(self, p, src, dst, n, attn_drop, training, impl):
        """p = W h (n x heads*f) already computed; src, dst: edge endpoints sorted by dst."""
        p = p.view(n, self.heads, self.f)
        s_dst = (p * self.a_dst).sum(-1)  # n x heads
        s_src = (p * self.a_src).sum(-1)
        e = F.leaky_relu(s_dst.index_select(0, dst) + s_src.index_select(0, src), 0.2)  # E x heads
        idx = dst.unsqueeze(1).expand(-1, self.heads)
        emax = torch.full((n, self.heads), float("-inf")).scatter_reduce(0, idx, e.detach(), "amax")
        ex = torch.exp(e - emax.index_select(0, dst))
        den = torch.zeros(n, self.heads).index_add_(0, dst, ex)
        alpha = ex / den.index_select(0, dst)
        alpha = dropout(alpha, attn_drop, training, impl)
        msg = p.index_select(0, src) * alpha.unsqueeze(-1)  # E x heads x f
        out = torch.zeros(n, self.heads, self.f).index_add_(0, dst, msg)
        out = out.reshape(n, -1) if self.concat else out.mean(1)
        return out + self.bias


class GAT(torch.nn.Module):
    def __init__(self, nin, hidden, heads, classes, drop, impl):
        super().__init__()
        self.l1 = GATLayer(nin, heads, hidden, True)
        self.l2 = GATLayer(heads * hidden, 1, classes, False)
        self.drop, self.impl = drop, impl

    def forward(self, x, src, dst, n):
        t, p, impl = self.training, self.drop, self.impl
        h = x.matmul(self.l1.w, p, t) if isinstance(x, SparseFeatures) else dropout(x, p, t, impl) @ self.l1.w
        h = F.elu(self.l1(h, src, dst, n, p, t, impl))
        h = dropout(h, p, t, impl) @ self.l2.w
        return self.l2(h, src, dst, n, p, t, impl)


def run(args):
    torch.set_num_threads(args.threads)
    results = []
    for name in args.names.split(","):
        meta, n, nf, edges, feat, y, (tr, va, te) = load(args.root, name)
        loops = np.arange(n, dtype=np.int64)
        src = np.concatenate([edges[:, 0], loops])
        dst = np.concatenate([edges[:, 1], loops])
        order = np.lexsort((src, dst))  # in-edges of every vertex together
        src, dst = torch.from_numpy(src[order]), torch.from_numpy(dst[order])
        if args.features == "sparse":
            x = SparseFeatures(*feat, n, nf)
        else:
            x = torch.zeros(n, nf)
            x[torch.from_numpy(feat[0]), torch.from_numpy(feat[1])] = torch.from_numpy(feat[2])
        ncls = meta["num_classes"]
        final, at_best, times, stopped = [], [], [], []
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            model = GAT(nf, args.hidden, args.heads, ncls, args.dropout, args.dropout_impl)
            opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
            best_acc, best_loss, test_best, bad = -1.0, float("inf"), 0.0, 0
            for epoch in range(args.epochs):
                t0 = time.perf_counter()
                model.train()
                opt.zero_grad()
                loss = F.cross_entropy(model(x, src, dst, n)[tr], y[tr])
                loss.backward()
                opt.step()
                times.append(time.perf_counter() - t0)
                if args.patience:
                    model.eval()
                    with torch.no_grad():
                        out = model(x, src, dst, n)
                    vloss = F.cross_entropy(out[va], y[va]).item()
                    pred = out.argmax(1)
                    vacc = (pred[va] == y[va]).float().mean().item()
                    if vacc >= best_acc or vloss <= best_loss:
                        if vacc >= best_acc and vloss <= best_loss:
                            test_best = (pred[te] == y[te]).float().mean().item()
                        best_acc, best_loss, bad = max(vacc, best_acc), min(vloss, best_loss), 0
                    else:
                        bad += 1
                        if bad == args.patience:
                            break
            model.eval()
            with torch.no_grad():
                pred = model(x, src, dst, n).argmax(1)
            acc = (pred[te] == y[te]).float().mean().item()
            final.append(acc)
            at_best.append(test_best if args.patience else acc)
            stopped.append(epoch + 1)
            print("  %s seed=%d epochs=%d test=%.4f at-best-val=%.4f" % (name, seed, epoch + 1, acc, at_best[-1]), flush=True)
        r = {
            "dataset": name, "nodes": n, "edges": int(src.numel()), "seeds": args.seeds, "epochs": args.epochs,
            "patience": args.patience, "epochs_run_mean": float(np.mean(stopped)),
            "test_acc_mean": float(np.mean(final)), "test_acc_std": float(np.std(final)),
            "test_acc_at_best_val_mean": float(np.mean(at_best)), "test_acc_at_best_val_std": float(np.std(at_best)),
            "epoch_median_ms": statistics.median(times) * 1e3,
            "epoch_p10_ms": float(np.percentile(times, 10)) * 1e3, "epoch_p90_ms": float(np.percentile(times, 90)) * 1e3,
        }
        results.append(r)
        print("%s: test accuracy %.2f%% +- %.2f (final epoch), %.2f%% +- %.2f (best val); median epoch %.2f ms "
              "(p10 %.2f, p90 %.2f)" % (name, 100 * r["test_acc_mean"], 100 * r["test_acc_std"],
                                         100 * r["test_acc_at_best_val_mean"], 100 * r["test_acc_at_best_val_std"],
                                         r["epoch_median_ms"], r["epoch_p10_ms"], r["epoch_p90_ms"]), flush=True)
    print("JSON " + json.dumps(results))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default="datasets")
    p.add_argument("--names", default="cora,citeseer")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--patience", type=int, default=0, help="early stopping as the GAT paper; 0: off")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.6)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--features", choices=["sparse", "dense"], default="sparse",
                   help="sparse: torch.sparse.mm on the stored values; dense: a dense feature matrix")
    p.add_argument("--dropout-impl", choices=["bernoulli", "rand"], default="rand",
                   help="rand: a mask from torch.rand; bernoulli: F.dropout, idiomatic but 5-20x slower an epoch here (torch 1.13 CPU)")
    args = p.parse_args(argv)
    print("torch %s, threads %d" % (torch.__version__, args.threads), flush=True)
    run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
