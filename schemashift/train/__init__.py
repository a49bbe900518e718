"""Training: supervised warm-start on oracle trajectories (`sft`), the offline tiny model (`tiny`).

Modules here import torch, transformers and peft inside their functions; importing the package
stays light.
"""
