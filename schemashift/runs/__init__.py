"""Training runs as the layers above see them: the run contract (`contract`: a run's settings,
repeats and scenarios, resolved from the config) and the reward variants it may optimise
(`rewards`). Light: the report and the workflow read runs without importing the training stack."""
