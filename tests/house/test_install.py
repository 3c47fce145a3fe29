"""conli is installed from a clone or a wheel, never by name from an index (issue 30).

Every "install this" the user reads, in the README, the docs and conli's messages, has to work:
``pip install 'conli[openai]'`` in a fresh environment finds nothing, since conli is not
on PyPI. A missing extra is one clear line (exit 2), never a traceback.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conli.cli import app as cli
from conli.errors import install_hint
from tests.support.paths import ROOT

# ``pip install conli``, ``pip install 'conli[x]'``, ``pip install -U "conli[x]"``: by name
BY_NAME = re.compile(r"pip install\s+(?:-\S+\s+)*['\"]?conli\b(?![-.\w])")


def test_an_install_hint_names_the_clone_and_the_installed_conli() -> None:
    hint = install_hint("openai")
    assert "pip install -e '.[openai]'" in hint
    assert "pip install 'conli[openai]' into this environment" in hint


@pytest.mark.parametrize("page", ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_no_page_installs_conli_by_name(page: str) -> None:
    assert not BY_NAME.findall((ROOT / page).read_text(encoding="utf-8"))


def test_the_readme_installs_from_the_clone_or_a_wheel() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install -e '.[local]'" in readme and "make wheel" in readme


def test_conli_messages_give_the_install_hint() -> None:
    """Only ``install_hint`` words the command; every other message calls it."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "src" / "conli").rglob("*.py")) if path.name != "errors.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BY_NAME.search(line)
    ]
    assert not offenders


def test_the_makefile_builds_a_wheel() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^wheel:.*\n\t.*pip wheel .*--no-deps", makefile, re.MULTILINE)


@pytest.mark.integration
def test_serve_without_the_service_extra_is_one_line_and_exit_2() -> None:
    """The service module names its types when the extra is missing (was a NameError)."""
    code = ("import sys; sys.modules['fastapi'] = None\n"
            "from conli.cli.app import main; raise SystemExit(main(['serve']))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert install_hint("service") in run.stderr


def test_batch_on_ray_without_the_ray_extra_is_one_line_and_exit_2(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "conli.batch.ray_engine", None)  # as if Ray were missing
    records = tmp_path / "in.jsonl"
    records.write_text('{"id": 1, "source": "A.", "response": "A."}\n')
    code = cli.main(["batch", str(records), str(tmp_path / "out.jsonl"), "--engine", "ray",
                     "--llm", "openai:gpt-test"])
    err = capsys.readouterr().err
    assert code == 2 and "--engine ray needs Ray" in err and install_hint("ray") in err


def test_eval_without_the_eval_extra_stops_before_any_model_call(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Its scores come last: without the check, a whole run went by before the traceback."""
    from conli.cli import eval_args
    from conli.evaluation import metrics

    monkeypatch.setattr(metrics, "EVAL_MODULES", ("sklearn", "conli_no_such_module"))
    monkeypatch.setattr(eval_args, "get_backend", _no_backend)
    labelled = tmp_path / "mine.jsonl"
    labelled.write_text('{"source": "It opened in 1962.", "response": "In 1963.", "label": 1}\n')
    code = cli.main(["eval", "detect", "--file", str(labelled), "--llm", "openai:gpt-test",
                     "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "conli_no_such_module missing" in err and install_hint("eval") in err
    assert not (tmp_path / "out").exists()  # refused before the run folder is claimed
    code = cli.main(["calibrate", "--file", str(labelled), "--llm", "openai:gpt-test",
                     "--out", str(tmp_path / "cal.json")])
    assert code == 2 and "conli_no_such_module missing" in capsys.readouterr().err


def _no_backend(*_args: object) -> None:
    raise AssertionError("no backend is built without the [eval] extra")


def test_the_eval_check_looks_for_every_package_of_the_eval_extra() -> None:
    """``metrics.EVAL_MODULES`` (import names) and pyproject's ``[eval]`` (distributions) agree."""
    import tomllib
    from importlib.metadata import packages_distributions

    from conli.evaluation.metrics import EVAL_MODULES

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["eval"]
    wanted = {canonical(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in extra}
    provided = packages_distributions()
    checked = {canonical(d) for module in EVAL_MODULES for d in provided.get(module, [])}
    assert checked == wanted


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: ``py.typed`` in the package, which the wheel target ships whole (issue 45).

    ``make wheel`` then ``python -m zipfile -l dist/conli-*.whl`` lists ``conli/py.typed``.
    """
    assert (ROOT / "src" / "conli" / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    wheel = pyproject.split("[tool.hatch.build.targets.wheel]")[1].split("\n[")[0]
    assert 'packages = ["src/conli"]' in wheel and "exclude" not in wheel
