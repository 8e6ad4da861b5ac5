"""``python -m tsattn.data list | where NAME... | fetch NAME...``: the dataset registry from a shell.

``where`` / ``fetch`` print one path per file (three for ``physionet2012``).
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from . import registry
from .errors import DataError
from .files import cache_dir, data_dir, offline


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tsattn.data", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="registered datasets and whether each is available locally")
    for name, text in (("where", "print the local path (no download)"), ("fetch", "download into the cache if absent")):
        p = sub.add_parser(name, help=text)
        p.add_argument("names", nargs="+", metavar="NAME")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            for name in registry.list_datasets("all"):
                spec = registry.get_spec(name)
                found = [p for p in registry.find_local(spec) if p is not None]
                if spec.kind == "series":
                    where = str(found[0]) if found else "not local"
                    print(f"{name:18s} {spec.split:11s} {spec.freq:6s} {spec.n_channels:4d} ch  {where}")
                    continue
                folders = sorted({str(p.parent) for p in found})
                where = "not local" if not found else f"{len(found)} of {len(spec.files)} files in {', '.join(folders)}"
                kind = f"by {spec.protocol.get('split', '?')}"
                print(f"{name:18s} {kind:11s} {'irreg':6s} {spec.n_variables:4d} var {where}")
            print(f"TSATTN_DATA_DIR={data_dir()}  cache={cache_dir()}  offline={offline()}")
        else:
            for name in args.names:
                for path in registry.resolve(name, download_missing=args.command == "fetch"):
                    print(path)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
