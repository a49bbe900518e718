"""The six scenarios of the original SchemaShift, as data (spec section 6).

Each entry also carries `solution`: an action sequence written from the scenario's ground
truth and drift plan, which the oracle policy plays to show the scenario is solvable.
"""

from __future__ import annotations

from typing import Any

from schemashift.env.episode import DriftSpec


def _call(tool: str, endpoint: str, **params: Any) -> dict[str, Any]:
    return {"type": "call_tool", "tool_call": {"tool": tool, "endpoint": endpoint, "params": params}}


def _report(tool: str, kind: str, description: str) -> dict[str, Any]:
    return {"type": "report_drift", "report": {"tool": tool, "drift_kind": kind, "description": description}}


def _complete(summary: str) -> dict[str, Any]:
    return {"type": "complete_task", "complete": {"summary": summary}}


_ATTENDEES_RENAME = {"from": "attendees", "to": "participants"}
_EMAIL_RENAME = {"from": "customer_email", "to": "email_address"}
_ALICE = {
    "contact_id": "c_1",
    "customer_email": "alice@customer.com",
    "name": "Alice Nguyen",
    "company": "Acme Corp",
    "status": "active",
}
_BOB = {
    "contact_id": "c_2",
    "customer_email": "bob@customer.com",
    "name": "Bob Taylor",
    "company": "Globex Industries",
    "status": "active",
}
_CAROL = {
    "contact_id": "c_3",
    "customer_email": "carol@customer.com",
    "name": "Carol Davis",
    "company": "Initech",
    "status": "inactive",
}

SCENARIOS: dict[str, dict[str, Any]] = {
    "E1_onboard_new_hire": {
        "tier": "easy",
        "max_steps": 8,
        "token_budget": 4000,
        "tools": ("mail", "calendar"),
        "seed_data": {"mail": {"messages": []}, "calendar": {"events": []}},
        "description": (
            "A new employee named Priya Sharma (priya@company.com) starts on Monday April 27. Send her a "
            "welcome email at priya@company.com with subject containing 'welcome', then create a calendar "
            "event titled 'New Hire Orientation' on Monday April 27 at 10:00 AM for 1 hour, inviting both "
            "Priya and her manager alex@company.com."
        ),
        "success_criteria": (
            "Welcome email sent to priya@company.com with 'welcome' in subject",
            "Calendar event created for Monday April 27 10am with both Priya and Alex attending",
        ),
        "drift_plan": (DriftSpec("calendar", "field_rename", 3, "create_event", _ATTENDEES_RENAME),),
        "ground_truth": {
            "mail.sent_count": 1,
            "mail.last_sent_to": "priya@company.com",
            "mail.last_subject_contains_welcome": True,
            "calendar.events_count": 1,
            "calendar.last_event_has_both_attendees": True,
        },
        "solution": (
            _call(
                "mail",
                "send_message",
                to="priya@company.com",
                subject="Welcome to the team, Priya!",
                body="Hi Priya, welcome aboard! Orientation is on Monday April 27 at 10:00.",
            ),
            _call(
                "calendar",
                "create_event",
                title="New Hire Orientation",
                start="2026-04-27T10:00:00Z",
                end="2026-04-27T11:00:00Z",
                attendees=["priya@company.com", "alex@company.com"],
            ),
            _report("calendar", "field_rename", "create_event renamed attendees to participants"),
            _call(
                "calendar", "list_events", date_from="2026-04-27T00:00:00Z", date_to="2026-04-27T23:59:59Z"
            ),
            _complete("Sent Priya's welcome email and scheduled New Hire Orientation with Alex."),
        ),
    },
    "E2_meeting_invite_blast": {
        "tier": "easy",
        "max_steps": 6,
        "token_budget": 4000,
        "tools": ("mail",),
        "seed_data": {"mail": {"messages": []}},
        "description": (
            "Send calendar invite emails to three team members for an all-hands meeting at 3:00 PM Friday. "
            "Recipients: alex@company.com, jordan@company.com, sam@company.com. Subject: 'All-Hands: Friday "
            "3pm'. Body should mention the time and agenda."
        ),
        "success_criteria": (
            "Three emails sent to the three listed recipients",
            "All three emails have subject containing 'All-Hands'",
        ),
        "drift_plan": (
            DriftSpec("mail", "endpoint_deprecation", 1, "send_message", {"replacement": "messages.send"}),
        ),
        "ground_truth": {"mail.sent_count": 3, "mail.sent_to_all_three_recipients": True},
        "solution": (
            _report("mail", "endpoint_deprecation", "send_message was replaced by messages.send"),
            *(
                _call(
                    "mail",
                    "messages.send",
                    to=recipient,
                    subject="All-Hands: Friday 3pm",
                    body="All-hands on Friday at 3:00 PM. Agenda: quarterly goals, team updates, Q&A.",
                )
                for recipient in ("alex@company.com", "jordan@company.com", "sam@company.com")
            ),
            _complete("Sent the all-hands invite to alex, jordan and sam."),
        ),
    },
    "E3_customer_lookup": {
        "tier": "easy",
        "max_steps": 8,
        "token_budget": 4000,
        "tools": ("crm",),
        "seed_data": {"crm": {"contacts": [_ALICE, _BOB, _CAROL]}},
        "description": (
            "A customer emailed support asking about their account: bob@customer.com. Look them up in the CRM "
            "by email, retrieve their full contact record, and update their status field to "
            "'support_in_progress'. Report back their company name in your final summary."
        ),
        "success_criteria": (
            "Customer bob@customer.com found in CRM",
            "Contact status updated to 'support_in_progress'",
            "Completion summary mentions the customer's company",
        ),
        "drift_plan": (DriftSpec("crm", "field_rename", 2, None, _EMAIL_RENAME),),
        "ground_truth": {
            "crm.contact_c_2_status": "support_in_progress",
            "complete_summary_mentions_company": True,
        },
        "solution": (
            _call("crm", "search_contacts", customer_email="bob@customer.com"),
            _call("crm", "update_contact", contact_id="c_2", status="support_in_progress"),
            _report("crm", "field_rename", "customer_email was renamed to email_address"),
            _call("crm", "get_contact", contact_id="c_2"),
            _complete("Bob Taylor (c_2) is now support_in_progress. Company: Globex Industries."),
        ),
    },
    "M1_customer_escalation": {
        "tier": "medium",
        "max_steps": 12,
        "token_budget": 6000,
        "tools": ("mail", "calendar", "crm"),
        "seed_data": {
            "mail": {"messages": []},
            "calendar": {"events": []},
            "crm": {"contacts": [_ALICE, _BOB]},
        },
        "description": (
            "A VIP customer at bob@customer.com has escalated: their subscription is about to lapse. Look them "
            "up in CRM, update their status to 'vip_escalation', send them a personalized retention email "
            "from support@company.com with subject 'Priority Support \u2014 [Customer Name]', and schedule a "
            "30-minute check-in call on Friday April 24 at 2:00 PM with both the customer and the account "
            "manager alex@company.com."
        ),
        "success_criteria": (
            "Customer contact retrieved with correct company",
            "CRM status updated to vip_escalation",
            "Retention email sent to bob@customer.com with Priority Support subject",
            "Calendar event created for Friday April 24 2pm with both customer and account manager",
        ),
        "drift_plan": (
            DriftSpec("crm", "field_rename", 1, None, _EMAIL_RENAME),
            DriftSpec("calendar", "field_rename", 6, "create_event", _ATTENDEES_RENAME),
        ),
        "ground_truth": {
            "crm.contact_c_2_status": "vip_escalation",
            "mail.sent_count": 1,
            "mail.last_sent_to": "bob@customer.com",
            "mail.last_subject_contains_priority_support": True,
            "calendar.events_count": 1,
            "calendar.last_event_has_both_attendees": True,
        },
        "solution": (
            _call("crm", "search_contacts", email_address="bob@customer.com"),
            _call("crm", "update_contact", contact_id="c_2", status="vip_escalation"),
            _call(
                "mail",
                "send_message",
                to="bob@customer.com",
                subject="Priority Support \u2014 Bob Taylor",
                body="Hi Bob, your Globex Industries subscription matters to us; let's talk on Friday.",
            ),
            _call(
                "calendar",
                "create_event",
                title="Check-in call: Bob Taylor",
                start="2026-04-24T14:00:00Z",
                end="2026-04-24T14:30:00Z",
                attendees=["bob@customer.com", "alex@company.com"],
            ),
            _report("crm", "field_rename", "customer_email was renamed to email_address"),
            _report("calendar", "field_rename", "create_event renamed attendees to participants"),
            _call(
                "calendar", "list_events", date_from="2026-04-24T00:00:00Z", date_to="2026-04-24T23:59:59Z"
            ),
            _complete(
                "Escalated Bob Taylor (Globex Industries), sent the retention email, booked the check-in."
            ),
        ),
    },
    "M2_weekly_report": {
        "tier": "medium",
        "max_steps": 10,
        "token_budget": 5000,
        "tools": ("mail", "calendar", "crm"),
        "seed_data": {
            "mail": {"messages": []},
            "calendar": {"events": []},
            "crm": {
                "contacts": [
                    {
                        "contact_id": "c_1",
                        "customer_email": "x@co.com",
                        "name": "X Person",
                        "company": "Co",
                        "status": "active",
                    },
                    {
                        "contact_id": "c_2",
                        "customer_email": "y@co.com",
                        "name": "Y Person",
                        "company": "Co",
                        "status": "active",
                    },
                    {
                        "contact_id": "c_3",
                        "customer_email": "z@co.com",
                        "name": "Z Person",
                        "company": "Co",
                        "status": "inactive",
                    },
                ]
            },
        },
        "description": (
            "Prepare the weekly sales report: pull the list of active contacts from CRM, send a summary email "
            "to sales-leads@company.com with subject 'Weekly Active Contacts Report' listing contact names, "
            "and schedule a report review meeting next Monday April 27 at 10:00 AM with the sales team leads "
            "sarah@company.com and mike@company.com."
        ),
        "success_criteria": (
            "Active contacts retrieved from CRM",
            "Summary email sent with 'Weekly' in subject",
            "Meeting scheduled for Monday April 27 10am with both sales leads",
        ),
        "drift_plan": (
            DriftSpec("mail", "endpoint_deprecation", 2, "send_message", {"replacement": "messages.send"}),
            DriftSpec("crm", "rate_limit_tightening", 4, None, {"limit": 2}),
        ),
        "ground_truth": {
            "mail.sent_count": 1,
            "mail.last_subject_contains_weekly": True,
            "calendar.events_count": 1,
            "calendar.last_event_has_both_sales_leads": True,
        },
        "solution": (
            _call("crm", "search_contacts"),
            _report("mail", "endpoint_deprecation", "send_message was replaced by messages.send"),
            _call(
                "mail",
                "messages.send",
                to="sales-leads@company.com",
                subject="Weekly Active Contacts Report",
                body="Active contacts this week: X Person, Y Person.",
            ),
            _report("crm", "rate_limit_tightening", "CRM now allows two calls before answering 429"),
            _call(
                "calendar",
                "create_event",
                title="Weekly Report Review",
                start="2026-04-27T10:00:00Z",
                end="2026-04-27T11:00:00Z",
                attendees=["sarah@company.com", "mike@company.com"],
            ),
            _call("crm", "get_contact", contact_id="c_1"),
            _complete("Sent the weekly active contacts report and scheduled the review with Sarah and Mike."),
        ),
    },
    "M3_event_cleanup": {
        "tier": "medium",
        "max_steps": 12,
        "token_budget": 6000,
        "tools": ("mail", "calendar"),
        "seed_data": {
            "mail": {"messages": []},
            "calendar": {
                "events": [
                    {
                        "event_id": "evt_1",
                        "title": "Old Planning Sync",
                        "start": "2026-04-20T10:00:00Z",
                        "end": "2026-04-20T11:00:00Z",
                        "attendees": ["alex@company.com"],
                        "status": "confirmed",
                    },
                    {
                        "event_id": "evt_2",
                        "title": "Cancelled Kickoff",
                        "start": "2026-04-21T14:00:00Z",
                        "end": "2026-04-21T15:00:00Z",
                        "attendees": ["alex@company.com"],
                        "status": "confirmed",
                    },
                ]
            },
        },
        "description": (
            "End-of-week calendar cleanup: find and cancel the 'Old Planning Sync' event, find and cancel the "
            "'Cancelled Kickoff' event, and create a new 'Friday Wrap-up' event for Friday April 24 at 4:00 PM "
            "with the team lead alex@company.com attending. Send a notification email to team-all@company.com "
            "with subject 'Calendar Updated \u2014 Friday Wrap-up Added' about the changes."
        ),
        "success_criteria": (
            "Old Planning Sync event cancelled or deleted",
            "Cancelled Kickoff event cancelled or deleted",
            "New Friday Wrap-up event created at 4pm with alex attending",
            "Notification email sent with 'Calendar Updated' in subject",
        ),
        "drift_plan": (
            DriftSpec(
                "calendar", "tool_removal", 2, "delete_event", {"fallback": "update_event status=cancelled"}
            ),
            DriftSpec("calendar", "field_rename", 5, "create_event", _ATTENDEES_RENAME),
        ),
        "ground_truth": {
            "calendar.evt_1_status": "cancelled",
            "calendar.evt_2_status": "cancelled",
            "calendar.events_count_new_friday_wrapup": 1,
            "mail.sent_count": 1,
            "mail.last_subject_contains_calendar_updated": True,
        },
        "solution": (
            _call("calendar", "update_event", event_id="evt_1", status="cancelled"),
            _report("calendar", "tool_removal", "delete_event was removed; cancel through update_event"),
            _call("calendar", "update_event", event_id="evt_2", status="cancelled"),
            _call(
                "mail",
                "send_message",
                to="team-all@company.com",
                subject="Calendar Updated \u2014 Friday Wrap-up Added",
                body="Cancelled Old Planning Sync and Cancelled Kickoff; added Friday Wrap-up on April 24 at 4 PM.",
            ),
            _report("calendar", "field_rename", "create_event renamed attendees to participants"),
            _call(
                "calendar",
                "create_event",
                title="Friday Wrap-up",
                start="2026-04-24T16:00:00Z",
                end="2026-04-24T17:00:00Z",
                participants=["alex@company.com"],
            ),
            _complete("Cancelled both events, added Friday Wrap-up with Alex, notified team-all."),
        ),
    },
}
