"""Settings read from the environment."""

from conli.config import Settings


def test_an_empty_environment_variable_means_unset(monkeypatch):
    monkeypatch.setenv("CONLI_LOCAL_MODEL", "")
    monkeypatch.setenv("CONLI_LLM", "")
    settings = Settings()  # type: ignore[call-arg]
    assert settings.local_model is None and settings.llm == "local"
