"""The guard in front of a chat model, in OpenAI's wire format (a front door's room).

``app`` mounts ``POST /v1/chat/completions`` and ``GET /v1/models`` on the service
(``conli serve --upstream SPEC``); ``client`` is the drop-in wrapper of an ``openai`` client
(``GuardedOpenAI``, ``AsyncGuardedOpenAI``). Both read a request with ``wire``, decide what
goes out with ``verdicts`` and release a streamed reply with ``release``; ``shapes`` writes
OpenAI's answers. Only ``app`` imports FastAPI; nothing here imports an SDK.
"""
