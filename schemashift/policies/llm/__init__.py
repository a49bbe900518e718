"""Model-backed policies: the interaction format, parsing, local and API models, the response cache."""
