"""The LLM agents of the pipeline: NLI detection, the rewrite and the points to cover.

The 1-5 judges that score a text are in ``conli.judges``.
"""
