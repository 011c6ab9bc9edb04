#!/usr/bin/env python3
"""Derive pythia_final.csv (what chapter 7 needs) from the Pythia evaluation tables.

Usage: python3 make_subset.py SOURCE_DIR OUT_DIR
SOURCE_DIR holds pythia_v1_evals.csv and pythia_v1_mmlu.csv.gz, flattened from
EleutherAI/pythia @ a19eecb807ec2c79a39ebf18108816e6ffffc1d5 `evals/pythia-v1/` (see README.md).

Keeps the main suite (folders without a batch-size or case-study variant; the standard 1B is
`pythia-1b-bf16`), the final checkpoint (step 143000), and per (family, size, shots, task) the
`acc` of the 8 tasks and 57 MMLU subtasks plus LAMBADA's `ppl`. Values are copied as stored.
"""

import csv
import gzip
import os
import sys

src, out = sys.argv[1], sys.argv[2]
rows = []
for name, opener in (("pythia_v1_evals.csv", open), ("pythia_v1_mmlu.csv.gz", gzip.open)):
    with opener(os.path.join(src, name), "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            main = r["variant"] in ("", "bf16") and r["eval_set"] in ("zero-shot", "five-shot")
            wanted = r["metric"] == "acc" or (r["task"], r["metric"]) == ("lambada_openai", "ppl")
            if main and wanted and r["step"] == "143000":
                family = "deduped" if r["deduped"] == "1" else "standard"
                rows.append(
                    [
                        family,
                        r["size_name"],
                        r["size_params"],
                        r["step"],
                        r["shots"],
                        r["task"].replace("hendrycksTest-", "mmlu-"),
                        r["metric"],
                        r["value"],
                    ]
                )
rows.sort()
with open(os.path.join(out, "pythia_final.csv"), "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["family", "size_name", "size_params", "step", "shots", "task", "metric", "value"])
    w.writerows(rows)
print(len(rows), "rows")
