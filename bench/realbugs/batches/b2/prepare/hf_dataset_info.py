"""Write a `dataset_info.json` that registers a local data file under a name.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): fine-tuning
frameworks that look their data sets up by name in a `dataset_info.json` (a folder given on the
command line) are pointed at a local synthetic file written by `hf_text_records.py`, instead of a
download. The entry names the file and, for preference data, marks it as ranked (two responses per
record, chosen first).

    python hf_dataset_info.py DIR NAME FILE [--ranking]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="folder that holds FILE and receives dataset_info.json")
    parser.add_argument("name", help="the data set's name on the command line")
    parser.add_argument("file", help="the data file, relative to DIR")
    parser.add_argument("--ranking", action="store_true", help="records hold a chosen and a rejected response")
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    info_path = folder / "dataset_info.json"
    info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else {}
    entry: dict[str, object] = {"file_name": args.file}
    if args.ranking:
        entry["ranking"] = True
    info[args.name] = entry
    info_path.write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(f"{args.name} -> {folder / args.file} in {info_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
