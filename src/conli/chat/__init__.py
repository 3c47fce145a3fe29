"""A chat app's doors: its state as conli reads and writes it, and the agent middleware.

``conli.chat.state`` finds what to check in a LangGraph or LangChain state (the answer,
this turn's sources, the question) and what a check writes back; ``conli.hook.check_node``
(a LangGraph node) and ``conli.chat.middleware`` (a LangChain agent middleware, the
``[langchain]`` extra) are the two doors over it.
"""
