"""Alerts and alert rules: everyone sees open and resolved alerts and the rules; admins edit rules.

Rule changes are POSTs (CSRF-protected), checked and audited in :mod:`streams_app.services.alert_rules`
like every other action; the edit buttons are hidden from other roles only as a courtesy.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from streams_app import services
from streams_app.alerts.models import Alert, AlertRule
from streams_app.alerts.rules import KIND_HELP, AlertRuleForm, duration_text
from streams_app.alerts.webhooks import webhook_display
from streams_app.views.common import render_screen
from streams_app.views.forms import validated
from streams_app.views.paging import newest_first

PAGE = 50


class AlertsFilterForm(forms.Form):
    state = forms.ChoiceField(required=False, choices=[("", "any"), *Alert.State.choices])
    rule = forms.IntegerField(required=False, min_value=1)
    before = forms.IntegerField(required=False, min_value=1)


def _kind_help() -> list[tuple[str, str, str]]:
    return [(AlertRule.Kind(kind).label, n, t) for kind, (n, t) in KIND_HELP.items()]


@require_GET
def alerts_list(request: HttpRequest) -> HttpResponse:
    params = validated(AlertsFilterForm, request.GET)
    rows = Alert.objects.select_related("rule")
    if params["state"]:
        rows = rows.filter(state=params["state"])
    if params["rule"]:
        rows = rows.filter(rule_id=params["rule"])
    page = newest_first(rows, before=params["before"], size=PAGE)
    rules = AlertRule.objects.annotate(open_count=Count("alerts", filter=Q(alerts__state=Alert.State.OPEN)))
    context = {
        "alerts": page.rows,
        "older": page.older,
        "params": params,
        "open_count": Alert.objects.filter(state=Alert.State.OPEN).count(),
        "rules": [(rule, webhook_display(rule.webhook_url), duration_text(rule.for_seconds)) for rule in rules],
        "can_edit": services.alert_rules_editable(user=request.user),
        "kind_help": _kind_help(),
    }
    return render_screen(request, "streams_app/alerts.html", context, partial="alerts")


def _form_page(request: HttpRequest, form: AlertRuleForm, rule: AlertRule | None, status: int = 200) -> HttpResponse:
    context = {
        "form": form,
        "rule": rule,
        "webhook": webhook_display(rule.webhook_url) if rule is not None else "",
        "kind_help": _kind_help(),
    }
    return render(request, "streams_app/alert_rule_form.html", context, status=status)


@require_http_methods(["GET", "POST"])
def alert_rule_new(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        services.alert_rule_form_require(user=request.user, action="alert_rule.create")
        return _form_page(request, AlertRuleForm(), None)
    services.alert_rule_authorize(user=request.user, action="alert_rule.create")
    form = AlertRuleForm(request.POST)
    if not form.is_valid():
        return _form_page(request, form, None, status=400)
    rule = services.alert_rule_create(user=request.user, data=form.cleaned_data)
    messages.success(request, f"Alert rule “{rule.name}” created; it is evaluated after the next snapshot.")
    return HttpResponseRedirect(reverse("alerts"))


@require_http_methods(["GET", "POST"])
def alert_rule_edit(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    if request.method == "GET":
        services.alert_rule_form_require(user=request.user, action="alert_rule.update")
        return _form_page(request, AlertRuleForm(rule=rule), rule)
    services.alert_rule_authorize(user=request.user, action="alert_rule.update", rule=rule)
    form = AlertRuleForm(request.POST, rule=rule)
    if not form.is_valid():
        return _form_page(request, form, rule, status=400)
    services.alert_rule_update(user=request.user, rule=rule, data=form.cleaned_data)
    messages.success(request, f"Alert rule “{rule.name}” saved.")
    return HttpResponseRedirect(reverse("alerts"))


@require_POST
def alert_rule_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    name = rule.name
    services.alert_rule_delete(user=request.user, rule=rule)
    messages.success(request, f"Alert rule “{name}” deleted.")
    return HttpResponseRedirect(reverse("alerts"))
