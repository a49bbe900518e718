"""One module per `schemashift` verb; see schemashift.cli for the interface a module provides."""
