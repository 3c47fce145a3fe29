"""Every stored benchmark run has a config that renders the command it was made with.

benchmarks/runs/<run>.toml is one config per folder of benchmarks/results/. ``conli eval run
--dry-run`` shows the command the config runs now and the one the run was recorded with; a
config is held to its recorded command (the same task, data, options and settings, once
the paths that moved with the results are followed) and its settings to those the run's
results file recorded. The lock pins each run's config and results by hash, and every
citation of a run in the docs resolves through it. No model is loaded here.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from conli.cli.app import main
from conli.config import Settings
from conli.evaluation import lock, runs
from tests.support.paths import ROOT

BENCH = ROOT / "benchmarks"
CONFIGS = sorted((BENCH / "runs").glob("*.toml"))
RESULTS = BENCH / "results"
BUDGET = 10_000_000  # bytes of benchmarks/results (8.97 MB when the budget was set)
LARGEST = 1 << 20  # no stored file above 1 MiB
# where the recorded commands' paths are now (eval/ became benchmarks/, issue 63)
MOVED = {"eval/results/": "benchmarks/results/", "eval/features/": "benchmarks/data/features/",
         "eval/heldout/": "benchmarks/data/heldout-issue55/",
         "eval/injection/": "benchmarks/data/injection/",
         "/work/runs/collect-fused.json": "benchmarks/results/detect-fused-v3/collect-model.json"}
SCRIPTS = {p.name: p.relative_to(ROOT).as_posix() for p in BENCH.glob("experiments/*/*.py")}
# a script whose task the conli command took over: what it runs as, its defaults spelt out
BECAME = {"injection.py": ["conli", "eval", "injection", "--cases",
                           "benchmarks/data/injection/cases.jsonl"]}
NOT_A_FIGURE = ("--out", "--cache-dir")  # where a run writes and caches change no figure
CONFIG = re.compile(r"benchmarks/runs/[\w.-]+\.toml")


def _ids(paths: Iterable[Path]) -> list[str]:
    return [p.stem for p in paths]


def _moved(text: str) -> str:
    for old, new in MOVED.items():
        text = text.replace(old, new)
    return text


def _words(line: str) -> tuple[dict[str, str], list[str]]:
    """A shell line's settings (VAR=value in front) and its words."""
    words = shlex.split(line)
    env = {}
    while words and re.match(r"[A-Z_]+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = _moved(value)
    return env, words


def _normal(words: list[str]) -> tuple[tuple[str, ...], list[tuple[str, tuple[str, ...]]]]:
    """(program and subcommands, sorted options) with moved paths followed."""
    head, *rest = words
    if head == "python":
        script, *rest = rest
        name = Path(script).name
        program = BECAME.get(name) or ["python", SCRIPTS[name]]
        rest = program[3:] + rest if name in BECAME else rest
        program = program[:3] if name in BECAME else program
    else:  # conli, .venv/bin/conli, python -m's __main__.py or -c: the conli command
        program = ["conli"]
    while rest and not rest[0].startswith("--"):
        program.append(rest.pop(0))
    options: list[tuple[str, tuple[str, ...]]] = []
    for word in rest:
        if word.startswith("--"):
            options.append((word, ()))
        else:
            flag, values = options[-1]
            options[-1] = (flag, (*values, _moved(word)))
    kept = [(f, tuple("/".join(Path(v).parts[-2:]) for v in vs) if f == "--data-dir" else vs)
            for f, vs in options if f not in NOT_A_FIGURE]
    return tuple(program), sorted(kept)


def _stored(name: str) -> dict[str, Any] | None:
    for file in ("results.json", "speed.json", "bench.json", "one-source.json"):
        if (RESULTS / name / file).exists():
            found: dict[str, Any] = json.loads((RESULTS / name / file).read_text("utf-8"))
            return found
    return None


def test_every_stored_run_has_one_config() -> None:
    folders = sorted(p.name for p in RESULTS.iterdir() if p.is_dir())
    assert sorted(_ids(CONFIGS)) == folders and len(folders) >= 82


@pytest.mark.parametrize("path", CONFIGS, ids=_ids(CONFIGS))
def test_the_dry_run_renders_the_recorded_command_and_settings(
        path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    config = runs.load(path.relative_to(ROOT))
    recorded = config.recorded
    assert recorded is not None and recorded.commit and recorded.source
    assert main(["eval", "run", str(path.relative_to(ROOT)), "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert all(f"#   {line}" in shown for line in recorded.command.splitlines())
    if config.task == "record":
        assert f"# not run again: {config.why_not}" in shown
        return
    now = runs.argv(path.relative_to(ROOT), config)
    assert runs.command(path.relative_to(ROOT), config) in shown
    lines = recorded.command.splitlines()
    if config.task == "decide":  # a removed pairing script: it read the runs the sides read
        read = {r for c in config.compare for side in (c.candidate, c.current)
                for r in side.runs()}
        named = {Path(*Path(_moved(w)).parts[:3]) if w.startswith("eval/results/")
                 else Path(_moved(w)) for w in shlex.split(recorded.command)[2:]
                 if w.startswith("eval/") and not w.endswith(path.stem)}
        assert named <= read
        return
    assert len(now) == len(lines)
    for rendered, line in zip(now, lines, strict=True):
        env, words = _words(line)
        assert env == config.settings
        assert _normal(rendered) == _normal(words)


@pytest.mark.parametrize("path", CONFIGS, ids=_ids(CONFIGS))
def test_a_recorded_command_is_the_one_the_results_file_holds(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = runs.load(path)
    stored = _stored(path.stem)
    assert config.recorded is not None
    if stored is None or not config.recorded.source.split(",")[0].endswith(".json"):
        return  # the command is written down elsewhere (benchmarks.sh, the docs, run.sh)
    provenance = stored.get("provenance") or {}
    command = provenance.get("command") or stored.get("command")
    command = shlex.join(command) if isinstance(command, list) else command
    assert _words(config.recorded.command)[1][1:] == shlex.split(command)[1:]
    recorded = provenance.get("settings") or {
        k: v for k, v in provenance.items() if k in ("detectors", "judge_mode", "nli_prompt")}
    for name, value in config.settings.items():
        monkeypatch.setenv(name, value)
    now = Settings()
    for name in config.settings:
        field = name.removeprefix("CONLI_").lower()
        if field in recorded:
            mine = json.loads(json.dumps(getattr(now, field), default=str))
            theirs = recorded[field]
            assert mine == (_moved(theirs) if isinstance(theirs, str) else theirs), name


def test_the_lock_pins_every_run_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    path = Path("benchmarks") / lock.LOCK
    locked = lock.read_lock(path)
    assert set(locked) == set(_ids(CONFIGS))
    assert lock.relock(path, Path("benchmarks/runs")) == locked, (
        "a run's config or results changed without the lock: `make benchmarks-lock`")
    assert all(entry["commit"] and len(entry["commit"]) == 40 for entry in locked.values())


def _cited(text: str) -> set[str]:
    """The runs a page cites.

    benchmarks/results/<run> and benchmarks/runs/<run>.toml, and in the history pages the
    runs' former place, eval/results/<run>; a name ending in * or - (a shell variable
    followed) is a prefix.
    """
    found = re.findall(r"(?:benchmarks|eval)/results/(\w[\w.*-]*)", text)
    found += re.findall(r"benchmarks/runs/(\w[\w.*-]*)\.toml", text)
    return {name.rstrip(".") for name in found}


def _unresolved(names: set[str], locked: dict[str, Any]) -> set[str]:
    return {name for name in names
            if not (name in locked or (name.endswith(("*", "-")) and any(
                run.startswith(name.rstrip("*")) for run in locked)))}


def test_every_run_the_docs_cite_resolves_through_the_lock() -> None:
    locked = lock.read_lock(BENCH / lock.LOCK)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), BENCH / "README.md",
             *sorted(BENCH.glob("experiments/*/README.md"))]
    cited = {page.relative_to(ROOT).as_posix(): _cited(page.read_text("utf-8"))
             for page in pages}
    assert sum(map(len, cited.values())) >= 60
    assert {page: _unresolved(names, locked) for page, names in cited.items()
            if _unresolved(names, locked)} == {}
    assert _unresolved({"detect-gone", "injection-round9-*"}, locked) == {
        "detect-gone", "injection-round9-*"}  # the check can fail
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text("utf-8")
    assert len(benchmarks.splitlines()) <= 400
    assert "eval/" not in benchmarks.replace("conli eval", "")


def test_every_table_of_the_benchmarks_names_the_runs_it_comes_from() -> None:
    """Each row names its run config, or the paragraph over the table names them all."""
    text = (ROOT / "docs" / "benchmarks.md").read_text("utf-8")
    unnamed = []
    for block in re.split(r"\n\n", text):
        lines = block.splitlines()
        rows = [line for line in lines if line.startswith("|")][2:]
        if not rows:
            continue
        caption = text[:text.index(block)].rstrip().rsplit("\n\n", 1)[-1]
        if not CONFIG.search(caption) and not all(CONFIG.search(row) for row in rows):
            unnamed.append(lines[0])
    assert unnamed == []


def test_the_results_stay_under_their_size_budget() -> None:
    files = [p for p in RESULTS.rglob("*") if p.is_file()]
    sizes = {p.relative_to(RESULTS).as_posix(): p.stat().st_size for p in files}
    assert sum(sizes.values()) <= BUDGET, f"{sum(sizes.values()):,} bytes"
    assert {name: size for name, size in sizes.items() if size > LARGEST} == {}
    assert {name: size for name, size in sizes.items()
            if name.endswith("predictions.jsonl") and size > lock.COMPRESS_OVER} == {}


@pytest.mark.integration
def test_no_result_file_lives_outside_benchmarks_results() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=False)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    names = ("results.json", "predictions.jsonl", "predictions.jsonl.gz", "speed.json",
             "bench.json", "scored.jsonl", "run.json", "one-source.json")
    outside = [f for f in tracked.stdout.splitlines()
               if f.rsplit("/", 1)[-1] in names and not f.startswith("benchmarks/results/")]
    assert outside == []


# --- the runner -------------------------------------------------------------------------


def _write(folder: Path, name: str, text: str) -> Path:
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    path = folder / "runs" / f"{name}.toml"
    path.write_text(text)
    return path


SCRIPT = """import json, os, sys
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
seen = {k: v for k, v in os.environ.items() if k.startswith("CONLI_")}
json.dump({"settings": seen, "args": sys.argv[1:]}, open(os.path.join(out, "results.json"), "w"))
sys.exit(int(os.environ.get("CONLI_MAX_REASKS", "1")) == 7)
"""


def test_a_run_passes_only_its_settings_refuses_to_mix_and_enters_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "step.py").write_text(SCRIPT)
    config = _write(tmp_path / "bench", "toy", 'task = "experiment"\nscript = "step.py"\n'
                    'steps = [["--seed", "3", "--out", "{out}"]]\n\n[settings]\n'
                    'CONLI_NLI_PROMPT = "v1"\n')
    (tmp_path / "bench" / "lock.json").write_text('{"runs": {}}\n')
    monkeypatch.setenv("CONLI_DETECTORS", '["cot"]')  # the shell's own: not passed
    monkeypatch.setenv("CONLI_CACHE_DIR", str(tmp_path / "cache"))  # changes no figure: kept
    assert main(["eval", "run", str(config)]) == 0
    out = tmp_path / "bench" / "results" / "toy"
    made = json.loads((out / "results.json").read_text())
    assert made["settings"] == {"CONLI_NLI_PROMPT": "v1",
                                "CONLI_CACHE_DIR": str(tmp_path / "cache")}
    assert made["args"] == ["--seed", "3", "--out", "bench/results/toy"]
    assert "not passing CONLI_DETECTORS" in capsys.readouterr().err
    entry = lock.read_lock(tmp_path / "bench" / "lock.json")["toy"]
    assert entry["results"] == "bench/results/toy" and entry["config_sha256"] == runs.digest(config)
    assert main(["eval", "run", str(config)]) == 2  # results there: not written over
    assert "holds a run already" in capsys.readouterr().err
    assert main(["eval", "run", str(config), "--resume"]) == 0  # an experiment goes on


def test_a_failing_step_fails_the_run_and_is_not_locked(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "step.py").write_text(SCRIPT)
    config = _write(tmp_path / "bench", "bad", 'task = "experiment"\nscript = "step.py"\n'
                    'steps = [["--out", "{out}"], ["--out", "{out}"]]\n\n[settings]\n'
                    'CONLI_MAX_REASKS = "7"\n')
    (tmp_path / "bench" / "lock.json").write_text('{"runs": {}}\n')
    assert main(["eval", "run", str(config)]) == 1
    assert lock.read_lock(tmp_path / "bench" / "lock.json") == {}


@pytest.mark.parametrize(("text", "message"), [
    ('task = "decide"\n', "decide needs [[compare]] tables"),
    ('task = "experiment"\nscript = "x.py"\n', "experiment needs script and steps"),
    ('task = "detect"\n\n[settings]\nCONLI_NLI_PROMT = "v1"\n',
     "not conli settings: CONLI_NLI_PROMT"),
    ('task = "detect"\nsteps = [["x"]]\n', 'script and steps are for task = "experiment"'),
    ('task = "guess"\n', "task"),
    ('task = "detect"\n[data\n', "not a valid run config"),
    ('task = "record"\nwhy_not = "gone"\n', "record needs why_not and [recorded]"),
])
def test_a_bad_config_is_refused_naming_its_file(tmp_path: Path, text: str, message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    config = _write(tmp_path, "bad", text)
    assert main(["eval", "run", str(config), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and message in err


def test_a_record_is_shown_not_run_and_a_decision_does_not_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = _write(tmp_path, "old", 'task = "record"\nwhy_not = "its flags are gone"\n\n'
                    '[recorded]\ncommand = "conli eval judge --sentences 3"\nsource = "x"\n')
    assert main(["eval", "run", str(record)]) == 2
    assert "not run again: its flags are gone" in capsys.readouterr().err
    decide = _write(tmp_path, "pick", 'task = "decide"\n\n[[compare]]\nname = "a"\n'
                    'candidate = { run = "a" }\ncurrent = { run = "b" }\n')
    (tmp_path / "results" / "pick").mkdir(parents=True)
    (tmp_path / "results" / "pick" / "results.json").write_text("{}")
    assert main(["eval", "run", str(decide), "--resume"]) == 2
    assert "a decide run does not resume" in capsys.readouterr().err


# --- the decisions the docs cite, reproduced from the stored runs -------------------------

CITED = {  # config -> a figure docs/benchmarks.md prints for it, as `conli eval decide` does
    "judge-decision": "**+18.7 [+10.3, +27.7]**",
    "paired-minicheck-vs-fused-v3": "**-5.1 [-12.2, +1.8]**",
    "scale-decision": "**-1.7 [-2.6, -0.7]**",
    "score-fallback": "**+3.4 [-3.9, +10.6]**",
    "paired-rewrite-layout": "**-2.7 [-15.0, +9.6]**",
    "paired-looks3-v3": "**+0.7 [-4.4, +5.7]**",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CITED))
def test_a_stored_decision_reproduces_the_figure_the_docs_cite(
        name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["eval", "decide", f"benchmarks/runs/{name}.toml"]) == 0
    assert CITED[name] in capsys.readouterr().out
    rows = [line for line in (ROOT / "docs" / "benchmarks.md").read_text("utf-8").splitlines()
            if f"benchmarks/runs/{name}.toml" in line]
    assert any(CITED[name].strip("*") in row for row in rows), rows


def test_the_runner_runs_the_conli_command_as_its_dry_run_shows_it() -> None:
    line = ["conli", "eval", "detect", "--dataset", "all"]
    from conli.evaluation.runner import executable
    assert executable(line) == [sys.executable, "-m", "conli.cli", *line[1:]]
    assert executable(["python", "x.py", "--out", "o"]) == [sys.executable, "x.py", "--out", "o"]
