"""SchemaShift Bench: tool-using agents under API schema drift.

Importing the package is cheap on purpose: the simulation core needs only the standard
library, and heavy dependencies are imported by the commands that use them.
"""

__version__ = "0.1.0"
