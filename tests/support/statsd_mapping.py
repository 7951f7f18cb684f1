"""tests/support/statsd_mapping.py: a statsd_exporter mapping (tests/testdata/envoy_gateway_statsd_mapping.yaml)
applied to a statsd name the way statsd_exporter's mapper applies it, written from its documented behaviour:

- glob rules first, in their order, the first that matches wins: the name is split at every '.', a pattern part '*'
  matches any one part (an empty one too) and captures it, any other part must be equal; as many parts as the
  pattern has;
- then regex rules, in their order, the first whose pattern is found anywhere in the name (unanchored) wins;
- a rule limited to a statsd type ("only: counter") passes over names of other types; a timer ("ms") is an
  observer;
- the series name and the label values expand $N (or ${N}) to the Nth capture.

map_name(rules, name, statsd_type) -> (series, labels) or None when no rule matches (statsd_exporter then exports
the name as it is, sanitized, where Envoy Gateway's dashboards do not look).
"""
import re

import yaml


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)["rules"]


def _expand(template, captures):
    return re.sub(r"\$\{?(\d+)\}?", lambda m: captures[int(m.group(1)) - 1] or "", template)


def _type_ok(rule, statsd_type):
    only = rule.get("only")
    if not only:
        return True
    kind = {"c": "counter", "g": "gauge", "ms": "observer", "h": "observer", "d": "observer"}[statsd_type]
    return only == kind


def _glob(pattern, name):
    want, parts = pattern.split("."), name.split(".")
    if len(want) != len(parts):
        return None
    captures = []
    for w, p in zip(want, parts):
        if w == "*":
            captures.append(p)
        elif w != p:
            return None
    return captures


def map_name(rules, name, statsd_type):
    for rule in rules:
        if "glob" in rule and _type_ok(rule, statsd_type):
            captures = _glob(rule["glob"], name)
            if captures is not None:
                return _result(rule, captures)
    for rule in rules:
        if "regex" in rule and _type_ok(rule, statsd_type):
            m = re.search(rule["regex"], name)
            if m:
                return _result(rule, list(m.groups()))
    return None


def _result(rule, captures):
    labels = {k: _expand(v, captures) for k, v in (rule.get("labels") or {}).items()}
    return _expand(rule["series"], captures), labels
