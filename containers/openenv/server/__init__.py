"""OpenEnv layout entry point; the server lives in `schemashift.server`."""
