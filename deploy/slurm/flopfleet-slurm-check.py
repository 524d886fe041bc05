#!/usr/bin/env python3
"""Slurm's side of ``flopfleet-agent check``: run it on this node and drain the node when a GPU is CRITICAL.

As slurm.conf's ``HealthCheckProgram`` (root, every HealthCheckInterval, killed after 60 s, exit status ignored)
it reads the collector's verdicts (``check --from-collector``: a request, no measurement); as a ``Prolog``
(``--measure`` to measure first) it also exits 1 on CRITICAL, so Slurm requeues the job instead of starting it on
a bad GPU. The reason names the GPU and why: ``flopfleet: GPU 1 faulty: 1 uncorrectable ECC error(s) ...``.

It never drains on WARNING or UNKNOWN (a collector that cannot be reached must not drain a cluster) unless told
to, never touches a node that someone else drained or downed (a reason not starting with ``flopfleet:``), and
undrains nothing: a person resumes a repaired node. Every decision is logged to syslog (daemon facility), stderr
and ``--log FILE``. Standard library only, Python 3.9 or later: it runs with the node's python3, whatever
environment the agent is installed in. Slurm passes no arguments: other options need a two-line wrapper.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import syslog
import time
from typing import Any

PREFIX = "flopfleet:"
#: Slurm stores longer reasons, but ``sinfo -R`` and ``scontrol show node`` show them on one line.
MAX_REASON = 200
WORDS = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
NAMES = {code: word for word, code in WORDS.items()}
VERDICT_CODES = {"ok": 0, "suspect": 1, "slow": 2, "faulty": 2, "unknown": 3}
#: slurmd runs HealthCheckProgram with SLURMD_NODENAME alone in its environment: where to look for commands.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="flopfleet-slurm-check",
        description="Run `flopfleet-agent check` on this node; drain the node on CRITICAL with the reason.",
        epilog="Arguments after -- go to `flopfleet-agent check` (its settings: /etc/flopfleet/agent.toml).",
    )
    add = parser.add_argument
    add("--node", help="Slurm node name (default: $SLURMD_NODENAME, else the short hostname)")
    add("--measure", action="store_true", help="measure the health profile first (a prolog or an idle-time job; "
        "too slow for HealthCheckProgram); default: read the collector's verdicts")  # fmt: skip
    add("--drain-on", default="CRITICAL", type=_levels,
        help="results that drain: WARNING, CRITICAL and/or UNKNOWN, comma-separated (default: CRITICAL)")  # fmt: skip
    add("--fail-job", action=argparse.BooleanOptionalAction, default=None,
        help="exit 1 on a draining result, so Slurm requeues the job (default: only in a slurmd prolog)")  # fmt: skip
    add("--timeout", type=float, help="seconds the check may take (default: 50; 900 with --measure)")
    add("--agent", help="the agent command (default: $FLOPFLEET_AGENT, else flopfleet-agent on PATH)")
    add("--log", help="also append each decision to this file")
    add("--dry-run", action="store_true", help="log what would be done, change nothing")
    add("check_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check_args[:1] == ["--"]:
        args.check_args = args.check_args[1:]
    return args


def _levels(text: str) -> frozenset[int]:
    words = [w.strip().upper() for w in text.split(",") if w.strip()]
    unknown = [w for w in words if w not in WORDS or w == "OK"]
    if unknown or not words:
        raise argparse.ArgumentTypeError(f"{text!r}: give WARNING, CRITICAL and/or UNKNOWN, comma-separated")
    return frozenset(WORDS[w] for w in words)


class Log:
    """One line per decision, to syslog, stderr (which slurmd keeps when a prolog fails) and an optional file."""

    def __init__(self, node: str, path: str | None) -> None:
        self.node, self.path = node, path
        syslog.openlog("flopfleet-slurm-check", syslog.LOG_PID, syslog.LOG_DAEMON)

    def __call__(self, message: str, priority: int = syslog.LOG_INFO) -> None:
        line = f"node {self.node}: {message}"
        syslog.syslog(priority, line)
        sys.stderr.write(f"flopfleet-slurm-check: {line}\n")
        if self.path:
            try:
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
            except OSError as exc:  # a log that cannot be written must not fail a prolog
                sys.stderr.write(f"flopfleet-slurm-check: cannot write {self.path}: {exc}\n")


def _command(name: str, environ: dict[str, str]) -> str | None:
    return shutil.which(name, path=os.pathsep.join(p for p in (environ.get("PATH"), SYSTEM_PATH) if p))


def run_check(args: argparse.Namespace, environ: dict[str, str], log: Log) -> tuple[int, dict[str, Any]]:
    """Check's exit code as its JSON states it, and the JSON; UNKNOWN (3) when there is no readable JSON, since an
    exit code alone (a usage error exits 2, a crash 1) cannot say which GPU is at fault."""
    agent = args.agent or environ.get("FLOPFLEET_AGENT") or _command("flopfleet-agent", environ)
    if not agent:
        log(f"UNKNOWN: flopfleet-agent not found in {environ.get('PATH') or SYSTEM_PATH}", syslog.LOG_ERR)
        return 3, {}
    command = [agent, "check", "--json", *([] if args.measure else ["--from-collector"]), *args.check_args]
    timeout = args.timeout or (900.0 if args.measure else 50.0)
    env = {**environ, "PATH": environ.get("PATH") or SYSTEM_PATH}
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                 stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    except OSError as exc:
        log(f"UNKNOWN: cannot run {agent}: {exc}", syslog.LOG_ERR)
        return 3, {}
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the check and the measuring processes it started
        child.communicate()
        log(f"UNKNOWN: {' '.join(command)} took more than {timeout:g} s; stopped", syslog.LOG_ERR)
        return 3, {}
    try:
        body = json.loads(out)
        code = int(body["exit_code"])
    except (ValueError, KeyError, TypeError):
        tail = " | ".join((err or out).strip().splitlines()[-3:])[:500]
        log(f"UNKNOWN: check exited {child.returncode} without its JSON: {tail}", syslog.LOG_ERR)
        return 3, {}
    return (code if code in NAMES else 3), body


def drain_reason(body: dict[str, Any], codes: frozenset[int]) -> str:
    """``flopfleet: GPU 1 faulty: <its first reason>; GPU 3 slow: ...``: printable ASCII, at most MAX_REASON."""
    parts = []
    for verdict in body.get("verdicts") or ():
        if VERDICT_CODES.get(verdict.get("level")) not in codes:
            continue
        reasons = verdict.get("reasons") or [""]
        parts.append(f"{_gpu(verdict)} {verdict.get('level')}" + (f": {reasons[0]}" if reasons[0] else ""))
    text = " ".join(f"{PREFIX} {'; '.join(parts) or body.get('level') or 'check failed'}".split())
    text = text.encode("ascii", "replace").decode("ascii")
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def _gpu(verdict: dict[str, Any], uuid: bool = False) -> str:
    index, name = verdict.get("gpu_index"), verdict.get("uuid")
    if index is None:
        return name or "machine"
    return f"GPU {index} {name}" if uuid and name else f"GPU {index}"


def node_state(node: str, environ: dict[str, str]) -> tuple[str, str]:
    """The node's state as sinfo words it (``idle``, ``drained``, ``mixed+drain`` ...) and its reason ('' if none)."""
    sinfo = _command("sinfo", environ)
    if not sinfo:
        raise OSError("sinfo not found")
    done = subprocess.run([sinfo, "--noheader", "--Node", "--nodes", node, "--format", "%T|%E"],
                          capture_output=True, text=True, env=environ, timeout=20)  # fmt: skip
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not lines:
        raise OSError(f"sinfo: {(done.stderr or done.stdout).strip() or 'no such node'}")
    state, _, reason = lines[0].partition("|")  # one line per partition of the node: the first says it
    return state.strip(), "" if reason.strip() == "none" else reason.strip()


def _scontrol(args: argparse.Namespace, environ: dict[str, str], log: Log, *update: str) -> bool:
    if args.dry_run:
        log(f"dry run: would run scontrol update {' '.join(update)}")
        return True
    scontrol = _command("scontrol", environ)
    if not scontrol:
        log("scontrol not found: the node is left as it is", syslog.LOG_ERR)
        return False
    done = subprocess.run([scontrol, "update", *update], capture_output=True, text=True, env=environ, timeout=20)
    if done.returncode != 0:
        log(f"scontrol update failed ({done.returncode}): {(done.stderr or done.stdout).strip()}", syslog.LOG_ERR)
    return done.returncode == 0


def act(
    args: argparse.Namespace, environ: dict[str, str], log: Log, node: str, code: int, body: dict[str, Any]
) -> None:
    """Drain the node or leave it, as the check's result and the node's current reason allow; never undrain."""
    word = NAMES[code]
    for verdict in body.get("verdicts") or ():
        if verdict.get("level") != "ok":
            reasons = "; ".join(verdict.get("reasons") or ()) or "no reason given"
            log(f"{_gpu(verdict, uuid=True)}: {verdict.get('level')}: {reasons}")
    if code not in args.drain_on:
        log(f"{word}: nothing to do")
        return
    try:
        state, reason = node_state(node, environ)
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"{word}: the node's state could not be read ({exc}): left as it is", syslog.LOG_ERR)
        return
    wanted = drain_reason(body, frozenset({code}))
    if reason and not reason.startswith(PREFIX):
        log(f"{word} ({wanted}), but the node is {state} by someone else ({reason}): left as it is")
    elif reason == wanted and "drain" in state:
        log(f"{word}: already {state}: {reason}")
    elif _scontrol(args, environ, log, f"nodename={node}", "state=drain", f"reason={wanted}"):
        log(f"{word}: drained: {wanted}", syslog.LOG_WARNING)


def main(argv: list[str] | None = None) -> int:
    """0, or 1 when the node is drained in a prolog (or with --fail-job): the job must not start here."""
    args = _options(argv)
    environ = dict(os.environ)
    node = args.node or environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    log = Log(node, args.log)
    code, body = run_check(args, environ, log)
    act(args, environ, log, node, code, body)
    fail_job = args.fail_job if args.fail_job is not None else environ.get("SLURM_SCRIPT_CONTEXT") == "prolog_slurmd"
    return 1 if fail_job and code in args.drain_on else 0


if __name__ == "__main__":
    sys.exit(main())
