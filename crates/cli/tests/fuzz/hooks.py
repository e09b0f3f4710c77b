"""Schemathesis hooks for fuzzing coderd (loaded through `hooks` in schemathesis.toml).

Three jobs:

* Path parameters: a random string rarely names anything, so most generated requests would stop
  at a 404 and never reach the handler's validation. Each path parameter is drawn either as
  generated or from the objects the test created (fixtures.json, written by the Rust test), so a
  good share of requests reach real resources.
* `POST /files` bodies: tar archives, sent as raw bytes.
* The check `rejected_writes_nothing`: a write (POST, PUT, PATCH, DELETE) answered with a 4xx must
  leave the server's state as it was. Before each write the hooks record a digest of what the
  owner can list; after a 4xx they list it again and compare.

Environment (set by the test or scripts/fuzz.sh):
  CODER_FUZZ_FIXTURES  path to fixtures.json: {"url", "owner_token", "params", "paths", "state"}
                       (crates/cli/tests/it/fuzz.rs writes it)
"""

from __future__ import annotations

import json
import os
import threading

import requests
import schemathesis
from hypothesis import strategies as st

WRITES = {"POST", "PUT", "PATCH", "DELETE"}

# Fields that change without any write by the request under test: the fuzzer's own requests
# refresh the caller's last-seen time and its key's last use and expiry (a session key's
# lifetime slides with use); a job's available workers, matched provisioners and waiting reason
# follow which daemons are online (the fixtures' daemon turns offline 90 s into the run); a
# template's active user count is recomputed in the background.
VOLATILE = {
    "active_user_count",
    "last_seen_at",
    "last_used",
    "last_used_at",
    "expires_at",
    "available_workers",
    "matched_provisioners",
    "waiting_reason",
}


def _load_fixtures() -> dict:
    path = os.environ.get("CODER_FUZZ_FIXTURES")
    if not path:
        raise RuntimeError("CODER_FUZZ_FIXTURES is not set; run through crates/cli/tests/it/fuzz.rs")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


FIXTURES = _load_fixtures()
SESSION = requests.Session()
SESSION.headers["Coder-Session-Token"] = FIXTURES["owner_token"]


# `POST /files` takes the raw bytes of a tar archive: sent as generated, like any binary body.
schemathesis.serializer.alias("application/x-tar", "application/octet-stream")


def _known(path: str) -> dict[str, list[str]]:
    """Known values of each path parameter of `path`: by path prefix (the longest wins), else by
    parameter name."""
    known = dict(FIXTURES.get("params", {}))
    for prefix, values in sorted(FIXTURES.get("paths", {}).items(), key=lambda kv: len(kv[0])):
        if path.startswith(prefix):
            known.update(values)
    return known


@schemathesis.hook
def flatmap_path_parameters(ctx, path_parameters):
    if not path_parameters or ctx.operation is None:
        return st.just(path_parameters)
    known = _known(ctx.operation.path)
    parts = {}
    for name, generated in path_parameters.items():
        values = known.get(name)
        if values:
            # Known values twice as likely as the generated one: most requests should reach a
            # handler, some should exercise the lookups' refusals.
            parts[name] = st.one_of(st.just(generated), st.sampled_from(values), st.sampled_from(values))
        else:
            parts[name] = st.just(generated)
    return st.fixed_dictionaries(parts)


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _digest() -> dict[str, object]:
    """What the owner can list, by endpoint, without the fields that change on their own."""
    state = {}
    for path in FIXTURES["state"]:
        resp = SESSION.get(FIXTURES["url"] + path, timeout=30)
        try:
            body = resp.json()
        except ValueError:
            body = resp.text
        state[path] = (resp.status_code, _strip(body))
    return state


_before: dict[str, dict[str, object]] = {}
_lock = threading.Lock()


# Path segments the HTTP client resolves away (`/organizations/./templates` and
# `/organizations//templates` are sent as `/organizations/templates`): the request would reach
# another route, and its answer would be judged against the wrong operation. The stateful phase
# produces empty ones from links (a site role's `organization_id` is "").
VANISHING_SEGMENTS = {"", ".", ".."}


@schemathesis.hook
def before_call(ctx, case, kwargs):
    for name, value in (case.path_parameters or {}).items():
        if value in VANISHING_SEGMENTS:
            # Still names nothing, and now reaches the operation under test.
            case.path_parameters[name] = f"segment{value.replace('.', '-dot')}"
    if case.method.upper() in WRITES:
        digest = _digest()
        with _lock:
            _before[case.id] = digest


def _differences(before: dict, after: dict) -> list[str]:
    out = []
    for path in before:
        if before[path] != after.get(path):
            b = json.dumps(before[path], sort_keys=True)
            a = json.dumps(after.get(path), sort_keys=True)
            # The first differing stretch is enough to see what was written.
            i = next((n for n, (x, y) in enumerate(zip(b, a)) if x != y), min(len(a), len(b)))
            start = max(0, i - 120)
            out.append(f"GET {path}:\n  before: …{b[start:i + 200]}…\n  after:  …{a[start:i + 200]}…")
    return out


@schemathesis.check
def rejected_writes_nothing(ctx, response, case):
    """A write refused with a 4xx changed nothing the owner can list."""
    if case.method.upper() not in WRITES:
        return None
    with _lock:
        before = _before.pop(case.id, None)
    if before is None or not 400 <= response.status_code < 500:
        return None
    changed = _differences(before, _digest())
    if changed:
        raise AssertionError(
            f"{case.method.upper()} {case.path} was refused with {response.status_code} "
            "but changed the server's state:\n" + "\n".join(changed)
        )
    return None
