"""The simulated SaaS tools of the SchemaShift world."""

from schemashift.env.tools.base import EndpointSchema, Tool, UnsupportedDrift
from schemashift.env.tools.calendar import CalendarTool
from schemashift.env.tools.crm import CrmTool
from schemashift.env.tools.mail import MailTool

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
