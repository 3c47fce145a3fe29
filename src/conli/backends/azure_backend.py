"""Azure OpenAI: the ``openai`` SDK's ``AzureOpenAI`` client behind the shared OpenAI backend.

``azure:<deployment>`` talks to ``{endpoint}/openai/deployments/<deployment>`` with the
configured ``api-version``. Credentials, in order: ``AZURE_OPENAI_API_KEY``, then
``AZURE_OPENAI_AD_TOKEN``, then Microsoft Entra ID through ``azure-identity`` if installed.
"""

from __future__ import annotations

from typing import Any

from conli.backends.openai_backend import OpenAIChatBackend, build_client, import_openai
from conli.config import BackendSettings
from conli.config.credentials import provider_variable
from conli.errors import AuthenticationError, ConfigError, install_hint

_ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"


def _entra_token_provider() -> Any:
    """Return a bearer-token callable from ``DefaultAzureCredential`` (None if not installed)."""
    try:
        from azure.identity import DefaultAzureCredential, get_bearer_token_provider
    except ImportError:
        return None
    return get_bearer_token_provider(DefaultAzureCredential(), _ENTRA_SCOPE)


def azure_backend(deployment: str, settings: BackendSettings) -> OpenAIChatBackend:
    """``azure:<deployment>``: an Azure OpenAI deployment, by key or Entra token."""
    deployment = deployment.strip()
    if not deployment:
        raise ConfigError("the azure backend needs a deployment name: azure:<deployment>")
    endpoint = settings.azure_openai_endpoint or provider_variable("AZURE_OPENAI_ENDPOINT")
    if not endpoint:
        raise ConfigError(
            "the azure backend needs an endpoint: set AZURE_OPENAI_ENDPOINT or "
            "CONLI_AZURE_OPENAI_ENDPOINT (https://<resource>.openai.azure.com)"
        )
    credentials: dict[str, Any] = {}
    keyed = provider_variable("AZURE_OPENAI_API_KEY") or provider_variable("AZURE_OPENAI_AD_TOKEN")
    if not keyed:
        provider = _entra_token_provider()
        if provider is None:
            raise AuthenticationError(
                "azure: no credentials; set AZURE_OPENAI_API_KEY, or AZURE_OPENAI_AD_TOKEN, or "
                f"install azure-identity ({install_hint('azure')}) to sign in with Entra ID"
            )
        credentials["azure_ad_token_provider"] = provider
    openai = import_openai()
    client = build_client(
        openai.AzureOpenAI,
        "azure",
        azure_endpoint=endpoint,
        azure_deployment=deployment,
        api_version=settings.azure_openai_api_version,
        timeout=settings.request_timeout,
        **credentials,
    )
    # max_tokens: every Azure api-version and GPT-4-class deployment accepts it.
    return OpenAIChatBackend(
        client, name="azure", model=deployment, settings=settings, token_param="max_tokens"
    )
