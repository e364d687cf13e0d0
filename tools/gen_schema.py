#!/usr/bin/env python3
"""Convert Kafka message-definition JSON into odradek's compact schema tables.

Usage::

    python3 tools/gen_schema.py [--src /work/shared/kafka-protocol] [--jar kafka-clients-4.4.0.jar]

Reads ``<src>/message/*.json`` (Kafka 3.9) and ``<src>/message-4.x-clients/*.json``
(the 4.x client API forms) plus ``<src>/errors.tsv`` and writes three generated,
checked-in modules:

* ``src/odradek/protocol/schema_tables.py`` -- MESSAGES / API_NAMES / UNSTABLE tables
* ``src/odradek/protocol/api_keys.py``      -- ``ApiKey`` IntEnum
* ``src/odradek/protocol/errors.py``        -- ``ErrorCode`` IntEnum + ``ERROR_INFO``

Only names, types, version ranges, tags and defaults are carried over; the
descriptive ``about`` text is not.  The runtime never reads the JSON.

Version merge rule: a message present in both folders uses the 4.x definition for
the versions inside the 4.x file's validVersions and the 3.9 definition for the
lower ones (e.g. Produce 0-13: 0-2 from 3.9, 3-13 from 4.x).  The two definitions
are merged into one field tree (field present in version v iff it is present in
the definition governing v); the merge is verified per version (same field
order, types, tags) and aborts on any inconsistency.

``latestVersionUnstable``: all versions are kept (the codec can encode/decode
them); the first unstable version of each API is recorded in ``UNSTABLE`` so the
broker can decide what to advertise.
"""
from __future__ import annotations

import argparse
import json
import os
import pprint
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT_DIR = os.path.join(ROOT, "src", "odradek", "protocol")
MAXV = 0x7FFF  # stands for "+" (open-ended upper bound)

PRIMITIVES = {"int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "bool", "string", "bytes", "uuid", "records"}


# ---------------------------------------------------------------- helpers
def load_json(path, text=None):
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    # strip // comments (whole-line and trailing; no JSON string here contains '//'
    # outside of about text, which we drop anyway -- be careful all the same)
    out_lines = []
    for line in text.splitlines():
        s = line.lstrip()
        if s.startswith("//"):
            continue
        out_lines.append(_strip_trailing_comment(line))
    return json.loads("\n".join(out_lines))


def _strip_trailing_comment(line):
    in_str = False
    esc = False
    for i, ch in enumerate(line):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "/" and line[i:i + 2] == "//":
            return line[:i]
    return line


def parse_versions(s):
    """'3+' -> {3..MAXV}, '0-12' -> {0..12}, '5' -> {5}, 'none'/None -> set()."""
    if s is None:
        return None
    s = str(s).strip()
    if s == "none" or s == "":
        return set()
    if s.endswith("+"):
        return set(range(int(s[:-1]), MAXV + 1))
    if "-" in s:
        a, b = s.split("-")
        return set(range(int(a), int(b) + 1))
    return {int(s)}


def to_range(vs, what=""):
    """set of versions -> (lo, hi) or () if empty; must be contiguous."""
    if not vs:
        return ()
    lo, hi = min(vs), max(vs)
    if len(vs) != hi - lo + 1:
        raise SystemExit(f"non-contiguous version set for {what}: {sorted(vs)[:20]}...")
    return (lo, hi)


_SNAKE_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake(name):
    """CamelCase -> snake_case.

    Rule: '_' before an upper-case letter preceded by a lower-case letter or
    digit, and before the last capital of an acronym run that is followed by a
    lower-case letter (``ISRNodes`` -> ``isr_nodes``); then lower-case.  The
    product name ``KRaft`` is treated as one word (``KRaftVersion`` ->
    ``kraft_version``).
    """
    name = name.replace("KRaft", "Kraft")
    return _SNAKE_RE.sub("_", name).lower()


def parse_default(ftype, raw, is_struct, is_array):
    """Return the Python default value stored in the tables."""
    if is_array:
        if raw is not None and str(raw) == "null":
            return None
        return []
    if is_struct:
        if raw is not None and str(raw) == "null":
            return None
        return {}  # marker: "a struct of its own defaults"
    if raw is None:
        return {"int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
                "float64": 0.0, "bool": False, "string": "", "bytes": b"",
                "uuid": b"\x00" * 16, "records": None}[ftype]
    if isinstance(raw, bool):
        return raw
    s = str(raw).strip()
    if s == "null":
        return None
    if ftype == "bool":
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        raise SystemExit(f"bad bool default {raw!r}")
    if ftype in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(s, 0)
    if ftype == "float64":
        return float(s)
    if ftype == "string":
        return s
    if ftype == "uuid":
        if s in ("", "AAAAAAAAAAAAAAAAAAAAAA"):
            return b"\x00" * 16
        raise SystemExit(f"unsupported uuid default {raw!r}")
    if ftype in ("bytes", "records"):
        if s == "":
            return b""
        raise SystemExit(f"unsupported bytes default {raw!r}")
    raise SystemExit(f"unsupported default {raw!r} for {ftype}")


# ---------------------------------------------------------------- per-definition normalisation
class Def:
    """One JSON file, normalised: fields get version *sets* (clipped to validVersions)."""

    def __init__(self, path, text=None):
        d = load_json(path, text)
        self.path = path
        self.name = d["name"]
        self.type = d["type"]
        self.api_key = d.get("apiKey")
        self.valid = parse_versions(d["validVersions"])
        self.flexible = parse_versions(d.get("flexibleVersions", "none"))
        self.unstable = bool(d.get("latestVersionUnstable"))
        common = {c["name"]: c for c in d.get("commonStructs", [])}
        self.fields = self._norm(d["fields"], common, self.name)

    def _norm(self, fields, common, where):
        out = []
        for f in fields:
            ftype = f["type"]
            is_array = ftype.startswith("[]")
            elem = ftype[2:] if is_array else ftype
            sub = f.get("fields")
            if elem not in PRIMITIVES:
                if sub is None:
                    if elem not in common:
                        raise SystemExit(f"{self.path}: unknown struct type {elem}")
                    sub = common[elem]["fields"]
                sub = self._norm(sub, common, where + "." + f["name"])
            elif sub:
                raise SystemExit(f"{self.path}: primitive with fields {f['name']}")
            versions = parse_versions(f["versions"]) & self.valid
            nf = {
                "name": f["name"],
                "type": ftype,
                "versions": versions,
                "nullable": (parse_versions(f.get("nullableVersions")) or set()) & self.valid,
                "tagged": (parse_versions(f.get("taggedVersions")) or set()) & self.valid,
                "tag": f.get("tag"),
                "default_raw": f.get("default"),
                "flexible": (parse_versions(f["flexibleVersions"]) & self.valid
                             if "flexibleVersions" in f else None),
                "fields": sub,
                "is_array": is_array,
                "is_struct": elem not in PRIMITIVES,
            }
            if nf["tagged"] and nf["tag"] is None:
                raise SystemExit(f"{self.path}: tagged field without tag {f['name']}")
            out.append(nf)
        return out


def merge_fields(low, high, low_vs, high_vs, where):
    """Merge two normalised field lists; low governs versions low_vs, high governs high_vs."""
    lmap = {f["name"]: f for f in low}
    hmap = {f["name"]: f for f in high}
    order = [f["name"] for f in high]
    prev = None
    for f in low:
        if f["name"] not in hmap:
            idx = order.index(prev) + 1 if prev is not None else 0
            order.insert(idx, f["name"])
        prev = f["name"]
    out = []
    for name in order:
        lf, hf = lmap.get(name), hmap.get(name)
        base = hf or lf

        def part(key, lf=lf, hf=hf):
            s = set()
            if lf is not None and lf[key]:
                s |= lf[key] & low_vs
            if hf is not None and hf[key]:
                s |= hf[key] & high_vs
            return s

        if lf is not None and hf is not None:
            for k in ("type", "tag", "is_array", "is_struct"):
                if lf[k] != hf[k] and (lf["versions"] & low_vs) and (hf["versions"] & high_vs):
                    raise SystemExit(f"{where}.{name}: {k} differs between 3.9 and 4.x")
            if lf["default_raw"] != hf["default_raw"] and str(lf["default_raw"]).lower() != str(hf["default_raw"]).lower():
                print(f"warning: {where}.{name}: default differs "
                      f"({lf['default_raw']!r} vs {hf['default_raw']!r}); using 4.x", file=sys.stderr)
        nf = dict(base)
        nf["versions"] = part("versions")
        nf["nullable"] = part("nullable")
        nf["tagged"] = part("tagged")
        if base["flexible"] is not None:
            nf["flexible"] = part("flexible")
        if base["fields"] is not None:
            nf["fields"] = merge_fields(lf["fields"] if lf else [], hf["fields"] if hf else [],
                                        low_vs, high_vs, where + "." + name)
        out.append(nf)
    return out


def check_order(merged, d, vs, where):
    """For each version in vs, the merged list restricted to present fields == d's list."""
    for v in vs:
        a = [f["name"] for f in merged if v in f["versions"]]
        b = [f["name"] for f in d if v in f["versions"]]
        if a != b:
            raise SystemExit(f"{where} v{v}: field order mismatch {a} vs {b}")
        dm = {f["name"]: f for f in d}
        for f in merged:
            if v in f["versions"] and f["fields"] is not None:
                check_order(f["fields"], dm[f["name"]]["fields"], {v}, where + "." + f["name"])


# ---------------------------------------------------------------- table emission
def emit_fields(fields, valid, where):
    out = []
    seen = set()
    for f in fields:
        vs = f["versions"] & valid
        if not vs:
            continue  # exists in no valid version
        sn = snake(f["name"])
        if sn in seen:
            raise SystemExit(f"{where}: duplicate snake name {sn}")
        seen.add(sn)
        elem = f["type"][2:] if f["is_array"] else f["type"]
        default = parse_default(elem, f["default_raw"], f["is_struct"], f["is_array"])
        sub = emit_fields(f["fields"], valid, where + "." + f["name"]) if f["fields"] is not None else None
        flex = None if f["flexible"] is None else to_range(f["flexible"], where + "." + f["name"])
        out.append((
            sn,
            f["type"],
            to_range(vs, where + "." + f["name"]),
            to_range(f["nullable"] & vs, where + "." + f["name"] + " nullable"),
            to_range(f["tagged"] & vs, where + "." + f["name"] + " tagged"),
            int(f["tag"]) if f["tagged"] & vs else None,
            default,
            flex,
            tuple(sub) if sub is not None else None,
        ))
    return tuple(out)


# APIs whose 4.x form the shared folder lacks: read from Apache Kafka's client jar (`--jar`), where the
# message definitions ship as common/message/<Name>.json.
FROM_JAR = ("ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
            "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse",
            # share groups (KIP-932): 3.9 has only the early-access v0; clients speak 1-2
            "ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponse",
            "ShareGroupDescribeRequest", "ShareGroupDescribeResponse",
            "ShareFetchRequest", "ShareFetchResponse",
            "ShareAcknowledgeRequest", "ShareAcknowledgeResponse",
            "DescribeShareGroupOffsetsRequest", "DescribeShareGroupOffsetsResponse",
            # the share coordinator's inter-broker APIs (3.9's v0 differs: no leader epoch in the summary)
            "InitializeShareGroupStateRequest", "InitializeShareGroupStateResponse",
            "ReadShareGroupStateRequest", "ReadShareGroupStateResponse",
            "WriteShareGroupStateRequest", "WriteShareGroupStateResponse",
            "DeleteShareGroupStateRequest", "DeleteShareGroupStateResponse",
            "ReadShareGroupStateSummaryRequest", "ReadShareGroupStateSummaryResponse",
            "AlterShareGroupOffsetsRequest", "AlterShareGroupOffsetsResponse",
            "DeleteShareGroupOffsetsRequest", "DeleteShareGroupOffsetsResponse",
            # the streams rebalance protocol (KIP-1071): not in 3.9
            "StreamsGroupHeartbeatRequest", "StreamsGroupHeartbeatResponse",
            "StreamsGroupDescribeRequest", "StreamsGroupDescribeResponse")


def build(src, jar=None):
    old_dir = os.path.join(src, "message")
    new_dir = os.path.join(src, "message-4.x-clients")
    olds = {}
    news = {}
    for dirname, bucket in ((old_dir, olds), (new_dir, news)):
        for fn in sorted(os.listdir(dirname)):
            if not fn.endswith(".json"):
                continue
            d = Def(os.path.join(dirname, fn))
            key = (d.api_key, d.type) if d.api_key is not None else (d.name, d.type)
            bucket[key] = d
    if jar is not None:
        import zipfile
        with zipfile.ZipFile(jar) as z:
            for name in FROM_JAR:
                member = f"common/message/{name}.json"
                d = Def(f"{jar}!{member}", z.read(member).decode("utf-8"))
                key = (d.api_key, d.type)
                if key not in news:
                    news[key] = d

    messages = {}
    api_names = {}
    unstable = {}
    for key in sorted(set(olds) | set(news), key=lambda k: (str(k[0]).zfill(4), k[1])):
        lo_d, hi_d = olds.get(key), news.get(key)
        if lo_d and hi_d:
            hi_vs = set(hi_d.valid)
            low_vs = {v for v in lo_d.valid if v < min(hi_vs)}
            fields = merge_fields(lo_d.fields, hi_d.fields, low_vs, hi_vs, hi_d.name)
            check_order(fields, lo_d.fields, low_vs, hi_d.name + "(3.9)")
            check_order(fields, hi_d.fields, hi_vs, hi_d.name + "(4.x)")
            valid = low_vs | hi_vs
            flex = (lo_d.flexible & low_vs) | (hi_d.flexible & hi_vs)
            main = hi_d
            unstable_from = max(hi_vs) if hi_d.unstable else None
            if hi_d.name != lo_d.name and hi_d.type == "request":
                print(f"note: {key}: renamed {lo_d.name} -> {hi_d.name}", file=sys.stderr)
                api_names.setdefault(key[0], []).append(lo_d.name)
        else:
            main = hi_d or lo_d
            fields = main.fields
            valid = set(main.valid)
            flex = main.flexible & valid
            unstable_from = max(valid) if main.unstable else None
        name = main.name
        flex_lo = min(flex) if flex else None
        if flex and flex != set(range(flex_lo, max(valid) + 1)):
            raise SystemExit(f"{name}: flexible versions not a suffix")
        messages[name] = (
            main.api_key,
            main.type,
            to_range(valid, name),
            flex_lo,
            emit_fields(fields, valid, name),
        )
        if main.api_key is not None and main.type == "request":
            base = name[:-len("Request")]
            api_names.setdefault(main.api_key, []).insert(0, base)
            if unstable_from is not None:
                unstable[main.api_key] = unstable_from
    # names of earlier requests (renamed) should also drop "Request"
    for k, names in api_names.items():
        api_names[k] = [n[:-len("Request")] if n.endswith("Request") else n for n in names]
    return messages, api_names, unstable


def camel_to_const(name):
    return snake(name).upper()


def write_tables(messages, api_names, unstable, out_dir):
    lines = [
        "# generated by tools/gen_schema.py, do not edit",
        '"""Compact Kafka message schema tables (Kafka 3.9 + 4.x client forms, merged).',
        "",
        "MESSAGES[name] = (api_key | None, kind, (min_version, max_version),",
        "                  first_flexible_version | None, FIELDS)",
        "FIELD = (snake_name, type, versions, nullable_versions, tagged_versions, tag,",
        "         default, flexible_versions_override, sub_fields | None)",
        "Version ranges are (lo, hi) with hi == 0x7fff meaning open-ended, or () for none;",
        "flexible_versions_override is None when the field inherits the message's.",
        "A struct default of {} means 'a struct holding its own field defaults'.",
        '"""',
        "",
        f"MAXV = {MAXV:#x}",
        "Z16 = bytes(16)  # the zero uuid",
        "",
    ]
    body = "MESSAGES = {\n"
    for name, m in messages.items():
        txt = pprint.pformat(m, width=110, compact=True)
        txt = txt.replace(repr(bytes(16)), "Z16")
        body += f"    {name!r}: {txt},\n"
    body += "}\n"
    lines.append(body)
    lines.append("# api_key -> canonical name (+ former names)")
    lines.append("API_NAMES = " + pprint.pformat({k: tuple(v) for k, v in sorted(api_names.items())},
                                                  width=100) + "\n")
    lines.append("# api_key -> first version marked latestVersionUnstable (kept in the tables)")
    lines.append("UNSTABLE = " + pprint.pformat(dict(sorted(unstable.items()))) + "\n")
    with open(os.path.join(out_dir, "schema_tables.py"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))

    # api_keys.py
    al = ["# generated by tools/gen_schema.py, do not edit",
          '"""Kafka API keys."""', "from enum import IntEnum", "", "",
          "class ApiKey(IntEnum):"]
    for k, names in sorted(api_names.items()):
        for n in names:
            al.append(f"    {camel_to_const(n)} = {k}")
    al += ["", "",
           "# api_key -> (min_version, max_version, first flexible request version | None,",
           "#             first flexible response version | None); small so that header",
           "# parsing does not need the (lazily imported) schema_tables module",
           "API_INDEX = {"]
    for name, m in messages.items():
        if m[1] == "request":
            resp = messages[name[:-len("Request")] + "Response"]
            al.append(f"    {m[0]}: ({m[2][0]}, {m[2][1]}, {m[3]}, {resp[3]}),")
    al += ["}", ""]
    with open(os.path.join(out_dir, "api_keys.py"), "w", encoding="utf-8") as f:
        f.write("\n".join(al))


def write_errors(src, out_dir):
    rows = []
    with open(os.path.join(src, "errors.tsv"), encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if not line.strip():
                continue
            cols = dict(zip(header, line.rstrip("\n").split("\t")))
            rows.append((int(cols["code"]), cols["name"], cols["retriable"].strip().lower() == "true",
                         cols.get("default_message", "")))
    rows.sort()
    el = ["# generated by tools/gen_schema.py, do not edit",
          '"""Kafka error codes (from Errors.java facts)."""',
          "from enum import IntEnum", "", "",
          "class ErrorCode(IntEnum):"]
    for code, name, _, _ in rows:
        el.append(f"    {name} = {code}")
    el += ["", "",
           "# code -> (retriable, default message)",
           "ERROR_INFO = {"]
    for code, name, retr, msg in rows:
        el.append(f"    {code}: ({retr}, {msg!r}),")
    el += ["}", "", "",
           "def error_name(code: int) -> str:",
           '    """Kafka\'s name of an error code (NOT_LEADER_OR_FOLLOWER), or "error N" for a code this table lacks."""',
           "    try:",
           "        return ErrorCode(code).name",
           "    except ValueError:",
           '        return f"error {code}"',
           "", "",
           "def is_retriable(code):",
           "    info = ERROR_INFO.get(code)",
           "    return bool(info and info[0])",
           "", "",
           "def error_message(code):",
           "    info = ERROR_INFO.get(code)",
           "    return info[1] if info else None",
           ""]
    with open(os.path.join(out_dir, "errors.py"), "w", encoding="utf-8") as f:
        f.write("\n".join(el))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default="/work/shared/kafka-protocol")
    ap.add_argument("--out", default=OUT_DIR)
    ap.add_argument("--jar", help="Apache Kafka's kafka-clients jar (make reference), for the FROM_JAR messages")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    messages, api_names, unstable = build(a.src, a.jar)
    write_tables(messages, api_names, unstable, a.out)
    write_errors(a.src, a.out)
    print(f"wrote {len(messages)} messages, {len(api_names)} api keys", file=sys.stderr)


if __name__ == "__main__":
    main()
