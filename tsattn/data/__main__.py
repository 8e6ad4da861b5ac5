"""``python -m tsattn.data list | where NAME... | fetch NAME...``: the dataset registry from a shell.

``where`` / ``fetch`` print one path per file (three for ``physionet2012``).
"""
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
            for name in registry.list_datasets("observations"):
                obs_spec = registry.get_observation_spec(name)
                found = [p for p in registry.find_local_files(obs_spec) if p is not None]
                folders = sorted({str(p.parent) for p in found})
                where = (
                    "not local" if not found
                    else f"{len(found)} of {len(obs_spec.files)} files in {', '.join(folders)}"
                )
                kind = f"by {obs_spec.protocol.get('split', '?')}"
                print(f"{name:18s} {kind:11s} {'irreg':6s} {obs_spec.n_variables:4d} var {where}")
            print(f"TSATTN_DATA_DIR={registry.data_dir()}  cache={registry.cache_dir()}  offline={registry.offline()}")
        else:
            for name in args.names:
                download = args.command == "fetch"
                if registry.is_observation_dataset(name):
                    for path in registry.resolve_files(name, download_missing=download):
                        print(path)
                else:
                    print(registry.resolve(name, download_missing=download))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
