"""Inputs are read up to their limit and one character more, never whole (issue 52.2).

``--source /dev/zero`` grew to gigabytes and ``yes | conli check --source -`` never ended:
each door now reads in chunks, stops past the limit and refuses with exit 2 naming the
setting. The endless inputs here would hang or exhaust memory if slurped; the subprocess
timeout turns that into a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conli.errors import EncodingError, InputTooLargeError
from conli.run.inputs import read_input, read_sources
from tests.support.paths import ROOT

SOURCE = "The library opened in 1962. It lends books free of charge."
RESPONSE = "The library opened in 1962."


def _env() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONLI_")}
    path = f"{ROOT / 'src'}{os.pathsep}{ROOT}"  # this tree's conli, not the installed one
    environment.update({"CONLI_TEST_FAKE": "1", "PYTHONPATH": path,
                        "CONLI_MAX_SOURCE_CHARS": "5000", "CONLI_MAX_RESPONSE_CHARS": "2000"})
    return environment


def _conli(*args: str, stdin: object = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.support.cli_runner", *args, "--llm",
                           "fake"], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=180, stdin=stdin)  # type: ignore[arg-type]


@pytest.fixture
def texts(tmp_path: Path) -> tuple[str, str]:
    src, resp = tmp_path / "s.txt", tmp_path / "r.txt"
    src.write_text(SOURCE, "utf-8")
    resp.write_text(RESPONSE, "utf-8")
    return str(src), str(resp)


@pytest.mark.integration
@pytest.mark.parametrize("command", ["check", "judge"])
def test_dev_zero_as_the_source_is_refused_at_once(command: str, texts: tuple[str, str]) -> None:
    done = _conli(command, "--source", "/dev/zero", "--response", texts[1])
    assert done.returncode == 2, done.stderr
    assert "source looks binary" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.integration
@pytest.mark.parametrize(("command", "flag", "setting"), [
    ("check", "--source", "CONLI_MAX_SOURCE_CHARS"),
    ("check", "--response", "CONLI_MAX_RESPONSE_CHARS"),
    ("judge", "--source", "CONLI_MAX_SOURCE_CHARS"),
    ("judge", "--response", "CONLI_MAX_RESPONSE_CHARS"),
])
def test_an_endless_pipe_on_stdin_is_refused_past_its_limit(
    command: str, flag: str, setting: str, texts: tuple[str, str],
) -> None:
    """``yes | conli check --source -``: the pipe never ends, the refusal comes anyway."""
    other = {"--source": ("--response", texts[1]), "--response": ("--source", texts[0])}[flag]
    yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        done = _conli(command, flag, "-", *other, stdin=yes.stdout)
    finally:
        yes.kill()
        yes.wait()
    assert done.returncode == 2, done.stderr
    assert f"has more than {int(_env()[setting]):,} characters" in done.stderr
    assert setting in done.stderr


def test_a_fifo_that_never_ends_is_read_no_further_than_the_limit(tmp_path: Path) -> None:
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    written = [0]

    def feed() -> None:
        try:
            with fifo.open("wb") as pipe:
                while written[0] < 50_000_000:  # a slurping reader would take all of it
                    pipe.write(b"word " * 1000)
                    written[0] += 5000
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    with pytest.raises(InputTooLargeError, match="response has more than 20,000 characters"):
        read_input(str(fifo), "response", max_chars=20_000)
    writer.join(timeout=30)
    assert not writer.is_alive() and written[0] < 1_000_000  # stopped near the limit


def test_several_sources_are_read_within_their_joined_limit(tmp_path: Path) -> None:
    one, two = tmp_path / "a.txt", tmp_path / "b.txt"
    one.write_text("a" * 60, "utf-8")
    two.write_text("b" * 60, "utf-8")
    assert read_sources([str(one), str(two)], max_chars=122) == ["a" * 60, "b" * 60]
    with pytest.raises(InputTooLargeError, match=r"sources have more than 121 characters "
                       r"joined.*b\.txt.*CONLI_MAX_SOURCE_CHARS"):
        read_sources([str(one), str(two)], max_chars=121)


def test_a_bad_byte_is_named_by_its_offset_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("\ufeff".encode() + "é".encode() * 40_000 + b"caf\xe9")
    with pytest.raises(EncodingError, match=r"byte 80006: b'\\xe9'"):
        read_input(str(path), "source", max_chars=100_000)
    path.write_bytes("\ufeffé".encode() * 3)
    assert read_input(str(path), "source", max_chars=10) == "é\ufeffé\ufeffé"
