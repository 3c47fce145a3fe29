import hashlib

import pytest

from conli.backends import model_store
from conli.errors import ModelStoreError


@pytest.fixture
def parts(tmp_path, monkeypatch):
    chunks = [b"first-chunk-", b"second-chunk-", b"third"]
    paths = []
    for i, data in enumerate(chunks):
        path = tmp_path / f"part{i}.bin"
        path.write_bytes(data)
        paths.append(path)
    whole = b"".join(chunks)
    monkeypatch.setattr(model_store, "part_paths", lambda: paths)
    monkeypatch.setattr(model_store, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(model_store, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    return paths, whole


def test_joins_chunks_in_order_and_verifies(tmp_path, parts):
    paths, whole = parts
    model = model_store.ensure_model(tmp_path / "cache")
    assert model.read_bytes() == whole
    for path in paths:  # a second run trusts the verified file and needs no chunks
        path.unlink()
    assert model_store.ensure_model(tmp_path / "cache") == model


def test_checksum_mismatch_fails_and_leaves_no_file(tmp_path, parts, monkeypatch):
    monkeypatch.setattr(model_store, "MODEL_SHA256", "0" * 64)
    with pytest.raises(ModelStoreError, match="failed verification"):
        model_store.ensure_model(tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_tampered_model_is_reassembled(tmp_path, parts):
    _, whole = parts
    model = model_store.ensure_model(tmp_path / "cache")
    model.write_bytes(b"X" * len(whole))  # same size, new mtime: marker no longer matches
    assert model_store.ensure_model(tmp_path / "cache").read_bytes() == whole


def test_missing_chunk_package_names_the_extra(monkeypatch):
    def missing(name):
        raise ImportError(name)

    monkeypatch.setattr(model_store.importlib, "import_module", missing)
    with pytest.raises(ModelStoreError, match=r"conli\[local\]"):
        model_store.part_paths()
