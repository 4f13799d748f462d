#!/usr/bin/python3
# Validates texts against a JSON schema with Debian's python3-jsonschema (draft 2020-12, formats checked).
# Usage: validate_json_schema.py FILE, FILE holding {"schema": ..., "texts": [...]}. Prints a JSON array:
# for each text "" when it is JSON the schema accepts, else why not.
import datetime
import json
import re
import sys

import jsonschema

checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
# python3-jsonschema checks time and date-time only with rfc3339-validator, which Debian does not ship.
RFC3339_TIME = re.compile(r'^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$')


@checker.checks('time')
def is_time(s):
    return not isinstance(s, str) or bool(RFC3339_TIME.match(s))


@checker.checks('date-time')
def is_date_time(s):
    if not isinstance(s, str):
        return True
    if len(s) < 11 or s[10] not in 'Tt':
        return False
    try:
        datetime.date.fromisoformat(s[:10])
    except ValueError:
        return False
    return bool(RFC3339_TIME.match(s[11:]))


def verdict(validator, text):
    try:
        value = json.loads(text)
    except ValueError as e:
        return 'not JSON: %s' % e
    errors = sorted(validator.iter_errors(value), key=str)
    return '' if not errors else errors[0].message


def main():
    with open(sys.argv[1], encoding='utf-8') as f:
        job = json.load(f)
    validator = jsonschema.Draft202012Validator(job['schema'], format_checker=checker)
    print(json.dumps([verdict(validator, t) for t in job['texts']]))


main()
