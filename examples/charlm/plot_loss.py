"""Plots charlm's loss log (the CSV the program writes) as a PNG.

Usage: python3 plot_loss.py OUT_DIR   (reads OUT_DIR/loss.csv, writes OUT_DIR/loss.png)

The training loss of each step is drawn faintly with its moving average over it, the
validation reports as points (the last one, over the whole validation split, labelled), and
the bigram baseline and the 1.9 nats/char goal as horizontal lines for scale.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BIGRAM = 2.504  # examples/charlm/bigram.py, add-one smoothing (README)
GOAL = 1.9


def read(path):
    train, val = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step = int(row["step"])
            if row["train_loss"]:
                train.append((step, float(row["train_loss"])))
            if row["val_loss"]:
                val.append((step, float(row["val_loss"])))
    return train, val


def moving_average(values, width):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= width:
            total -= values[i - width]
        out.append(total / min(i + 1, width))
    return out


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "charlm-out"
    train, val = read(os.path.join(out_dir, "loss.csv"))
    if not train:
        sys.exit(f"plot_loss: no training steps in {out_dir}/loss.csv")
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    steps, losses = zip(*train)
    ax.plot(steps, losses, color="tab:blue", alpha=0.25, linewidth=0.8)
    ax.plot(steps, moving_average(list(losses), 25), color="tab:blue",
            label="train (moving average)")
    if val:
        vs, vl = zip(*val)
        ax.plot(vs, vl, "o-", color="tab:orange", label="validation")
        ax.annotate(f"{vl[-1]:.3f}", (vs[-1], vl[-1]), textcoords="offset points", xytext=(6, 6))
    ax.axhline(BIGRAM, color="gray", linestyle=":", label=f"bigram baseline ({BIGRAM})")
    ax.axhline(GOAL, color="tab:green", linestyle="--", label=f"goal ({GOAL})")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/char)")
    ax.set_ylim(1.0, max(4.5, min(max(losses), 6)))
    ax.set_title("charlm: character-level transformer trained with nuvec")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    png = os.path.join(out_dir, "loss.png")
    fig.savefig(png)
    print(f"loss curve: {png}")


if __name__ == "__main__":
    main()
