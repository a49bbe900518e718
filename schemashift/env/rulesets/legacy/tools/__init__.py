"""The simulated SaaS tools of the legacy ruleset (v1 has its own, in `rulesets/v1/tools.py`)."""

from schemashift.env.rulesets.legacy.tools.base import EndpointSchema, Tool, UnsupportedDrift
from schemashift.env.rulesets.legacy.tools.calendar import CalendarTool
from schemashift.env.rulesets.legacy.tools.crm import CrmTool
from schemashift.env.rulesets.legacy.tools.mail import MailTool

TOOL_CLASSES: dict[str, type[Tool]] = {cls.name: cls for cls in (MailTool, CalendarTool, CrmTool)}

__all__ = [
    "TOOL_CLASSES",
    "CalendarTool",
    "CrmTool",
    "EndpointSchema",
    "MailTool",
    "Tool",
    "UnsupportedDrift",
]
