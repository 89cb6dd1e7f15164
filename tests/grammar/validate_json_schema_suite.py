"""Validates what json_schema_suite produced: every text must be JSON valid against its schema.

    validate_json_schema_suite.py SUITE_JSON OUT_DIR

Uses jsonschema's Draft 2020-12 validator with format checking (date, time and date-time through
rfc3339-validator, which must be installed: a format checker that is missing would pass anything).
"""
import glob
import json
import os
import sys

import jsonschema


def main():
    suite_path, out_dir = sys.argv[1], sys.argv[2]
    with open(suite_path, encoding="utf-8") as f:
        suite = json.load(f)
    cls = jsonschema.Draft202012Validator
    checker = cls.FORMAT_CHECKER
    for fmt in ("date", "time", "date-time", "uuid", "email"):
        if fmt not in checker.checkers:
            sys.exit(f"format checker for {fmt!r} is missing (install rfc3339-validator)")
    failures = 0
    texts = 0
    for index, entry in enumerate(suite):
        schema = entry["schema"]
        cls.check_schema(schema)
        validator = cls(schema, format_checker=checker)
        paths = sorted(glob.glob(os.path.join(out_dir, f"{index}_*.json")))
        if not paths:
            print(f"FAIL {entry['name']}: no texts")
            failures += 1
        for path in paths:
            texts += 1
            with open(path, "rb") as f:
                raw = f.read()
            try:
                value = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                print(f"FAIL {entry['name']} {os.path.basename(path)}: not JSON ({e}): {raw!r}")
                failures += 1
                continue
            errors = list(validator.iter_errors(value))
            if errors:
                print(f"FAIL {entry['name']} {os.path.basename(path)}: {errors[0].message}: {raw!r}")
                failures += 1
    print(f"{len(suite)} schemas, {texts} texts validated, {failures} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
