"""`kernelsweep prompt`: build and save the exact prompt of one role call."""

from __future__ import annotations

import json

from kernelsweep.core.fileio import write_json
from kernelsweep.prompting.strategies import build_prompt


def configure(parser) -> None:
    parser.add_argument("--spec", required=True, help="JSON: role, key, method, model, device, precision, corpus")
    parser.add_argument("--inputs", required=True, help="JSON: name -> path of the files this prompt reads")
    parser.add_argument("--out", required=True, help="prompt.json to write")


def main(args) -> int:
    record = build_prompt(json.loads(args.spec), json.loads(args.inputs))
    write_json(args.out, record)
    print(f"{args.out}: role={record['role']} stopped={record['stopped']} sha256={record['sha256'][:12]}")
    return 0
