"""Training: GRPO on the environment and supervised warm starts (SFT, the tiny offline model).

This package is the only importer of trl and unsloth. Its configuration, reward, checkpoint and
metric modules are plain Python so that the workflow and the tests can use them without a
training stack installed; the trainers import the stack inside their functions.
"""
