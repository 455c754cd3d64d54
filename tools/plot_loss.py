#!/usr/bin/env python3
"""Draws the loss curves of one or several training runs (the JSON-lines metrics files that
`[train] metrics_file` names) into one PNG.

    .venv/bin/python tools/plot_loss.py RUN.jsonl [NAME=RUN2.jsonl ...] -o loss.png
        [--smooth 10] [--title "..."] [--x tokens]

A run is `PATH` (labelled by its file name) or `LABEL=PATH`. A resumed run appends to its file:
the last record of a step is the one drawn. Evaluation records (`eval_loss`) are drawn as
markers in the run's colour. --smooth N adds a moving average over N steps beside the raw curve.
"""
import argparse
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_run(path: pathlib.Path):
    """{step: record} for training steps and for evaluations, the last record of a step kept."""
    train, evals = {}, {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            sys.exit(f"{path}:{number}: not JSON ({error.msg})")
        if "step" not in record:
            sys.exit(f"{path}:{number}: a record without \"step\"")
        if "eval_loss" in record:
            evals[record["step"]] = record
        elif "loss" in record:
            train[record["step"]] = record
    if not train:
        sys.exit(f"{path}: no training steps")
    return dict(sorted(train.items())), dict(sorted(evals.items()))


def moving_average(values, n):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= n:
            total -= values[i - n]
        out.append(total / min(i + 1, n))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="PATH or LABEL=PATH of a metrics file")
    parser.add_argument("-o", "--out", type=pathlib.Path, required=True, help="the PNG to write")
    parser.add_argument("--smooth", type=int, default=0, help="moving average over N steps")
    parser.add_argument("--title", default="training loss")
    parser.add_argument("--x", choices=["step", "tokens"], default="step")
    args = parser.parse_args()

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for index, run in enumerate(args.runs):
        label, _, path = run.rpartition("=")
        path = pathlib.Path(path)
        if not path.is_file():
            sys.exit(f"{path}: no such metrics file")
        label = label or path.stem.replace(".metrics", "")
        train, evals = read_run(path)
        steps = list(train)
        if args.x == "tokens":
            seen, xs = 0, []
            for record in train.values():
                seen += record.get("tokens", 0)
                xs.append(seen)
            to_x = dict(zip(steps, xs))
        else:
            to_x = {s: s for s in steps}
        losses = [r["loss"] for r in train.values()]
        colour, style = f"C{index}", ["-", "--", ":", "-."][index % 4]
        xs = [to_x[s] for s in steps]
        ax.plot(xs, losses, color=colour, alpha=0.35 if args.smooth > 1 else 1.0, linewidth=1,
                linestyle="-" if args.smooth > 1 else style,
                label=None if args.smooth > 1 else label)
        if args.smooth > 1:
            ax.plot(xs, moving_average(losses, args.smooth), color=colour, linewidth=2,
                    linestyle=style, label=f"{label} ({args.smooth}-step mean)")
        if evals:
            points = [(to_x[s], r["eval_loss"]) for s, r in evals.items() if s in to_x]
            ax.plot([p[0] for p in points], [p[1] for p in points], "o" if index == 0 else "x",
                    color=colour, markersize=6, label=f"{label} held-out")
    ax.set_xlabel("tokens" if args.x == "tokens" else "step")
    ax.set_ylabel("loss (nats / token)")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
