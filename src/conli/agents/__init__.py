"""The LLM agents of the pipeline: NLI detection, mitigation and the rubric judge."""
