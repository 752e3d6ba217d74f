"""The gate's files and console lines: ``gate.json`` (:func:`write_outputs`, read back by
:func:`read_result`), JUnit XML (:func:`junit_xml`), SARIF 2.1.0 (:func:`sarif`), and the lines a
person reads (:func:`summary_lines`, numbers rounded by :func:`readable`).
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from xml.etree import ElementTree as ET

from ..errors import RagmiError
from ..io import atomic_write_text, write_json
from .evaluation import (
    BREACH,
    EXIT_FAIL,
    EXIT_PASS,
    EXIT_UNDECIDED,
    JSON_VERSION,
    NO_EVIDENCE,
    PASS,
    VERDICT_UNDECIDED,
)
from .metrics import METRICS, SELECTORS

GATE_FILES = ("gate.json", "junit.xml", "gate.sarif")
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
READ_VERSIONS = (1, 2)  # the gate.json versions read_result reads


def _fails(cell: Mapping, fail_on_no_evidence: bool) -> bool:
    """Whether the cell fails the gate (``fails_gate``; a version-1 gate.json has none)."""
    if "fails_gate" in cell:
        return bool(cell["fails_gate"])
    return cell["status"] == BREACH or (cell["status"] == NO_EVIDENCE and fail_on_no_evidence)


def junit_xml(result: Mapping, timestamp: str | None = None, hostname: str | None = None) -> str:
    """JUnit XML: ``<testsuites>`` with one ``<testsuite>`` per limit and one ``<testcase>`` per cell.

    Written to validate against both the Apache Ant schema (windyroad/JUnit-Schema's JUnit.xsd: a
    bare ``testsuites``, every testsuite with package, id, timestamp, hostname, properties,
    system-out and system-err) and Jenkins' junit-10.xsd; ``skipped`` (no evidence without
    fail_on_no_evidence, the gate not failing on it) is Jenkins' and most CI readers' extension to the
    Ant format."""
    stamp = timestamp or time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    host = hostname or socket.gethostname() or "localhost"
    fone = result["fail_on_no_evidence"]
    root = ET.Element("testsuites")
    for i, lim in enumerate(result["limits"]):
        cells = [c for c in result["cells"] if c["limit"] == lim["id"]]
        failures = sum(c["status"] == BREACH for c in cells)
        errors = sum(c["status"] == NO_EVIDENCE and _fails(c, fone) for c in cells)
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": lim["id"],
                "package": "ragmi.gate",
                "id": str(i),
                "timestamp": stamp,
                "hostname": host,
                "tests": str(len(cells)),
                "failures": str(failures),
                "errors": str(errors),
                "time": "0",
            },
        )
        props = ET.SubElement(suite, "properties")
        for k in ("metric", "op", "limit", "two_sided", "min_n", "min_n_source", "table", "description"):
            value = lim.get(k, "")
            ET.SubElement(props, "property", {"name": k, "value": "none" if value is None else str(value)})
        for k, v in lim["selectors"].items():
            ET.SubElement(props, "property", {"name": k, "value": str(v)})
        for c in cells:
            name = "/".join(c[k] for k in SELECTORS if c[k]) + (
                f"/{c['utility_metric']}" if c["utility_metric"] else ""
            )
            case = ET.SubElement(suite, "testcase", {"name": name, "classname": f"ragmi.gate.{lim['id']}", "time": "0"})
            if c["status"] == BREACH:
                ET.SubElement(case, "failure", {"message": c["message"], "type": "breach"}).text = c["message"]
            elif c["status"] == NO_EVIDENCE:
                if _fails(c, fone):
                    ET.SubElement(case, "error", {"message": c["message"], "type": "no-evidence"}).text = c["message"]
                else:  # the JUnit schema gives <skipped> a message, no type
                    ET.SubElement(case, "skipped", {"message": c["message"]}).text = c["message"]
        ET.SubElement(suite, "system-out").text = "\n".join(c["message"] for c in cells)
        ET.SubElement(suite, "system-err").text = ""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _uri(path: str) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return p.as_uri()
    return p.as_posix()


def sarif(result: Mapping) -> dict:
    """SARIF 2.1.0: one ``reportingDescriptor`` per limit (``ruleId`` = the limit's id), one result per
    breached cell (``level: error``, ``kind: fail``) and per cell without evidence (``error`` when it
    fails the gate; otherwise ``kind: open`` with level ``none``, SARIF §3.27.9–10), located at the
    table's CSV row; ``partialFingerprints`` keep a finding's identity across runs. The invocation's
    ``exitCode`` is the gate's (3 for undecided)."""
    from .. import __version__

    fone = result["fail_on_no_evidence"]
    rules, index = [], {}
    for lim in result["limits"]:
        index[lim["id"]] = len(rules)
        sel = ", ".join(f"{k} {v}" for k, v in lim["selectors"].items())
        text = f"{METRICS[lim['metric']].what} {lim['op']} {lim['limit']:g} on {sel}"
        rules.append(
            {
                "id": lim["id"],
                "name": lim["metric"],
                "shortDescription": {"text": text},
                "fullDescription": {"text": lim["description"] or text},
                "defaultConfiguration": {"level": "error"},
                "properties": {
                    "metric": lim["metric"],
                    "op": lim["op"],
                    "limit": lim["limit"],
                    "two_sided": lim.get("two_sided", False),
                    "min_n": lim["min_n"],
                    "min_n_source": lim.get("min_n_source", "config"),
                },
            }
        )
    results = []
    for c in result["cells"]:
        if c["status"] == PASS:
            continue
        region = {"startLine": c["line"]} if c["line"] else None
        loc = {"physicalLocation": {"artifactLocation": {"uri": _uri(c["table"])}}}
        if region:
            loc["physicalLocation"]["region"] = region
        key = ":".join([c["limit"], *(c[k] for k in SELECTORS), c["utility_metric"]])
        res = {
            "ruleId": c["limit"],
            "ruleIndex": index[c["limit"]],
            "kind": "fail" if _fails(c, fone) else "open",
            "level": "error" if _fails(c, fone) else "none",
            "message": {"text": c["message"]},
            "locations": [loc],
            "partialFingerprints": {"ragmiGateCell/v1": key},
            "properties": {
                **{
                    k: c[k]
                    for k in ("status", "metric", "op", "limit_value", "value", "n", *SELECTORS, "utility_metric")
                },
                "flipped_value": c.get("flipped_value"),
            },
        }
        results.append(res)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ragmi gate",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "invocations": [{"executionSuccessful": True, "exitCode": result["exit_code"]}],
                "results": results,
            }
        ],
    }


def write_outputs(result: Mapping, out_dir: str | os.PathLike) -> dict[str, str]:
    """gate.json, junit.xml and gate.sarif in ``out_dir`` (atomically); their paths."""
    out = Path(out_dir)
    paths = {name: str(out / name) for name in GATE_FILES}
    write_json(result, paths["gate.json"])
    atomic_write_text(junit_xml(result), paths["junit.xml"])
    atomic_write_text(json.dumps(sarif(result), indent=2) + "\n", paths["gate.sarif"])
    return paths


_DECIMAL = re.compile(r"(?<![\w.+/-])-?\d+\.\d+(?:e[+-]?\d+)?(?![\w/]|\.\d)")
_AGAINST = re.compile(r"(>|<|within) (max|min) (-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)")


def _short(x: float, digits: int) -> str:
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"


def readable(text: str, digits: int = 3) -> str:
    """``text`` with every decimal of more than 3 decimal places rounded to ``digits`` significant
    digits (0.91346 -> 0.913, 0.051234 -> 0.0512, 12.3456 -> 12.3), for the lines a person reads;
    gate.json keeps the numbers as they are.  The bound after ``max``/``min`` is left as configured,
    and a number compared with one (``0.80004 > max 0.8``) keeps the digits that show the comparison."""

    def one(m: re.Match) -> str:
        token = m.group(0)
        mantissa = token.split("e")[0]
        if "e" not in token and len(mantissa.split(".")[1]) <= 3:
            return token
        if text[: m.start()].endswith(("max ", "min ")):
            return token
        x = float(token)
        against = _AGAINST.match(text, m.end() + 1) if text[m.end() : m.end() + 1] == " " else None
        for d in range(digits, 18):
            out = _short(x, d)
            if against is None:
                return out
            op, side, bound = against.group(1), against.group(2), float(against.group(3))
            y = float(out)
            shown = {">": y > bound, "<": y < bound}.get(op, y <= bound if side == "max" else y >= bound)
            if shown or out == token:
                return out
        return token

    return _DECIMAL.sub(one, text)


def summary_lines(result: Mapping) -> list[str]:
    """One line per cell that fails the gate (or is undecided), then the totals; numbers rounded for
    reading (:func:`readable`; the cells' messages in gate.json keep them as evaluated)."""
    fone = result["fail_on_no_evidence"]
    lines = []
    for c in result["cells"]:
        if c["status"] == BREACH:
            lines.append(readable(f"ragmi gate: BREACH {c['message']}"))
        elif c["status"] == NO_EVIDENCE:
            lines.append(
                readable(
                    f"ragmi gate: {'NO EVIDENCE' if _fails(c, fone) else 'no evidence (not failing)'} {c['message']}"
                )
            )
    k = result["counts"]
    total = (
        f"ragmi gate: {result['verdict'].upper()}: {k[BREACH]} breached, {k[NO_EVIDENCE]} without evidence, "
        f"{k[PASS]} passed, over {len(result['limits'])} limit(s)"
    )
    if result["verdict"] == VERDICT_UNDECIDED:
        total += ": no cell has evidence, the gate decides nothing at this n" + (
            f" (exit {result['exit_code']})" if result["exit_code"] else " (not failing: fail_on_undecided false)"
        )
    lines.append(total)
    return lines


def read_result(path: str | os.PathLike) -> dict:
    """A gate.json written by :func:`write_outputs` (RagmiError when it is not one)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise RagmiError(f"cannot read the gate's verdict {path}: {e}") from None
    codes = (EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED)
    if not isinstance(doc, dict) or doc.get("version") not in READ_VERSIONS or doc.get("exit_code") not in codes:
        raise RagmiError(f"{path} is not a gate.json of this ragmi (version {JSON_VERSION})")
    return doc
