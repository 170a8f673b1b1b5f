#!/usr/bin/env python3
"""multi_merge_ledger_reports: scripts/merge-ledger-reports.py over reports
the library itself wrote (tests/support/write_report.c, host backend), so a
change of the report's format that the script no longer reads goes red.

    test_merge_reports.py WRITE_REPORT MERGE_SCRIPT
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    writer, script = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for rank, scale in enumerate((1, 3)):
            text = subprocess.run([writer, str(scale)], check=True, capture_output=True,
                                  text=True).stdout
            assert "host device 1: " in text, text
            path = os.path.join(tmp, f"ledger.host{rank}.rank{rank}.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            paths.append(path)
        out = subprocess.run([sys.executable, script, "--json"] + paths, check=True,
                             capture_output=True, text=True).stdout
        doc = json.loads(out)
        assert doc["ranks"] == 2, doc
        mib, kib4 = 1 << 20, 4096
        assert doc["bytes"] == 4 * mib + 4 * kib4, doc
        assert doc["allocations"] == 8, doc
        sites = {s["site"]: s for s in doc["sites"]}
        assert sites["train.c:10"]["bytes"] == 4 * mib, sites
        assert sites["train.c:10"]["ranks"] == 2, sites
        assert sites["train.c:10"]["largest_rank"] == "ledger.host1.rank1", sites
        assert sites["train.c:10"]["largest_bytes"] == 3 * mib, sites
        assert sites["shard.c:20"]["bytes"] == 4 * kib4, sites
        assert sites["shard.c:20"]["allocations"] == 4, sites
        assert doc["sites"][0]["site"] == "train.c:10", doc["sites"]  # largest first
        devs = {(d["rank"], d["device"]): d["bytes"] for d in doc["devices"]}
        assert devs[("ledger.host0.rank0", "host device 0")] == mib, devs
        assert devs[("ledger.host1.rank1", "host device 1")] == 3 * kib4, devs
        text = subprocess.run([sys.executable, script] + paths, check=True,
                              capture_output=True, text=True).stdout
        assert "4.0 MiB (4194304 bytes) in 4 allocation(s) at train.c:10: 2 rank(s)" in text, text
        # Not a report: refused with a message, exit 1.
        bad = os.path.join(tmp, "bad.txt")
        with open(bad, "w", encoding="utf-8") as f:
            f.write("hello\n")
        r = subprocess.run([sys.executable, script, bad], capture_output=True, text=True)
        assert r.returncode == 1 and "not a metrale_alloc_report_all report" in r.stderr, r
    print("merge-ledger-reports: OK")


if __name__ == "__main__":
    main()
