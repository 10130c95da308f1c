"""The bigram baseline of the charlm corpus: P(next | current) from add-k smoothed counts over
the training split, evaluated on the validation split, in nats per character.

The split is charlm's: the vocabulary is the set of bytes of the whole file, the first 90% of
the bytes train and the last 10% validate. Usage: python3 bigram.py [corpus] [k ...]
"""
import math
import sys

import numpy as np


def split(data):
    n_train = len(data) * 9 // 10
    return data[:n_train], data[n_train:]


def bigram_loss(train, val, vocab, k):
    index = np.full(256, -1, dtype=np.int64)
    index[vocab] = np.arange(len(vocab))
    t, v = index[train], index[val]
    counts = np.zeros((len(vocab), len(vocab)))
    np.add.at(counts, (t[:-1], t[1:]), 1.0)
    probs = (counts + k) / (counts + k).sum(axis=1, keepdims=True)
    return float(-np.log(probs[v[:-1], v[1:]]).mean())


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "examples/charlm/data/shakespeare.txt"
    ks = [float(a) for a in sys.argv[2:]] or [1.0, 0.1]
    data = np.frombuffer(open(path, "rb").read(), dtype=np.uint8)
    vocab = np.unique(data)
    train, val = split(data)
    print(f"corpus {path}: {len(data)} bytes, vocabulary {len(vocab)}, "
          f"train {len(train)}, validation {len(val)}")
    print(f"uniform: {math.log(len(vocab)):.4f} nats/char")
    for k in ks:
        print(f"bigram, add-{k:g} smoothing: {bigram_loss(train, val, vocab, k):.4f} nats/char")


if __name__ == "__main__":
    main()
