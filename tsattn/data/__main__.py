"""``python -m tsattn.data list | where NAME... | fetch NAME...``: the dataset registry from a shell."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from . import registry
from .errors import DataError


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
            for name in registry.list_datasets():
                spec = registry.get_spec(name)
                path = registry.find_local(spec)
                where = str(path) if path else "not local"
                print(f"{name:18s} {spec.split:11s} {spec.freq:6s} {spec.n_channels:4d} ch  {where}")
            print(f"TSATTN_DATA_DIR={registry.data_dir()}  cache={registry.cache_dir()}  offline={registry.offline()}")
        else:
            for name in args.names:
                print(registry.resolve(name, download_missing=args.command == "fetch"))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
