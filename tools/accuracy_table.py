"""Cold and doctor accuracy on the real start-up logs (tests/groundtruth_accuracy.py).

    python tools/accuracy_table.py           # the table and its distribution, as in the README
    python tools/accuracy_table.py --write   # regenerate tests/data/ground-truth/accuracy.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.groundtruth_accuracy import TABLE, table  # noqa: E402


def _dist(rows: list[dict], key: str) -> str:
    errs = sorted(abs(r[key]) for r in rows)
    if not errs:
        return "-"
    p90 = errs[min(len(errs) - 1, round(0.9 * (len(errs) - 1)))]
    return f"{statistics.median(errs):.2f} % / {p90:.2f} % / {errs[-1]:.2f} %"


def main(argv: list[str]) -> int:
    rows = table()
    if "--write" in argv:
        TABLE.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {TABLE}")
    print("| case | figure | logged | cold | doctor |")
    print("|---|---|---|---|---|")
    for r in rows:
        fit = " (fitted on)" if r["fitted_on"] else ""
        print(
            f"| {r['case']}{fit} | {r['metric']} | {r['logged']:,} | {r['cold']:,} "
            f"({r['cold_error_pct']:+.2f} %) | {r['doctor']:,} ({r['doctor_error_pct']:+.2f} %) |"
        )
    print()
    print("| logs | n | cold: median / p90 / max abs error | doctor: median / p90 / max |")
    print("|---|---|---|---|")
    groups = {
        "all": rows,
        "not fitted on": [r for r in rows if not r["fitted_on"]],
        "SGLang": [r for r in rows if r["engine"] == "sglang"],
        "vLLM": [r for r in rows if r["engine"] == "vllm"],
        "datacenter GPUs": [r for r in rows if r["gpu_class"] == "datacenter"],
        "consumer GPUs": [r for r in rows if r["gpu_class"] == "consumer"],
    }
    for name, rs in groups.items():
        print(f"| {name} | {len(rs)} | {_dist(rs, 'cold_error_pct')} | {_dist(rs, 'doctor_error_pct')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
