"""Alerts and alert rules: everyone sees open and resolved alerts and the rules; admins edit rules.

Rule changes are POSTs (CSRF-protected), checked and audited in :mod:`streams_app.alerts.rules`, where
they run; the edit buttons are hidden from other roles only as a courtesy.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from streams_app.accounts import auth
from streams_app.alerts import rules as alert_rules
from streams_app.alerts.models import Alert, AlertRule
from streams_app.alerts.webhooks import webhook_display
from streams_app.views.common import render_screen
from streams_app.views.forms import validated

PAGE = 50


class AlertsFilterForm(forms.Form):
    state = forms.ChoiceField(required=False, choices=[("", "any"), *Alert.State.choices])
    rule = forms.IntegerField(required=False, min_value=1)
    before = forms.IntegerField(required=False, min_value=1)


@require_GET
def alerts_list(request: HttpRequest) -> HttpResponse:
    params = validated(AlertsFilterForm, request.GET)
    rows = Alert.objects.select_related("rule").order_by("-pk")
    if params["state"]:
        rows = rows.filter(state=params["state"])
    if params["rule"]:
        rows = rows.filter(rule_id=params["rule"])
    if params["before"]:
        rows = rows.filter(pk__lt=params["before"])
    page = list(rows[: PAGE + 1])
    rules = AlertRule.objects.annotate(open_count=Count("alerts", filter=Q(alerts__state=Alert.State.OPEN)))
    context = {
        "alerts": page[:PAGE],
        "older": page[PAGE - 1].pk if len(page) > PAGE else None,
        "params": params,
        "open_count": Alert.objects.filter(state=Alert.State.OPEN).count(),
        "rules": [(rule, webhook_display(rule.webhook_url), alert_rules.duration_text(rule.for_seconds)) for rule in rules],
        "can_edit": auth.role_of(request.user) >= auth.Role.ADMIN and not auth.read_only_blocked(),
        "kind_help": [(AlertRule.Kind(kind).label, n, t) for kind, (n, t) in alert_rules.KIND_HELP.items()],
    }
    return render_screen(request, "streams_app/alerts.html", context, partial="alerts")


def _form_page(request: HttpRequest, form: alert_rules.AlertRuleForm, rule: AlertRule | None, status: int = 200) -> HttpResponse:
    context = {
        "form": form,
        "rule": rule,
        "webhook": webhook_display(rule.webhook_url) if rule is not None else "",
        "kind_help": [(AlertRule.Kind(kind).label, n, t) for kind, (n, t) in alert_rules.KIND_HELP.items()],
    }
    return render(request, "streams_app/alert_rule_form.html", context, status=status)


@require_http_methods(["GET", "POST"])
def alert_rule_new(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        auth.require_role(request.user, auth.Role.ADMIN)
        return _form_page(request, alert_rules.AlertRuleForm(), None)
    alert_rules.alert_rule_authorize(user=request.user, action="alert_rule.create")
    form = alert_rules.AlertRuleForm(request.POST)
    if not form.is_valid():
        return _form_page(request, form, None, status=400)
    rule = alert_rules.alert_rule_create(user=request.user, data=form.cleaned_data)
    messages.success(request, f"Alert rule “{rule.name}” created; it is evaluated after the next snapshot.")
    return HttpResponseRedirect(reverse("alerts"))


@require_http_methods(["GET", "POST"])
def alert_rule_edit(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    if request.method == "GET":
        auth.require_role(request.user, auth.Role.ADMIN)
        return _form_page(request, alert_rules.AlertRuleForm(rule=rule), rule)
    alert_rules.alert_rule_authorize(user=request.user, action="alert_rule.update", rule=rule)
    form = alert_rules.AlertRuleForm(request.POST, rule=rule)
    if not form.is_valid():
        return _form_page(request, form, rule, status=400)
    alert_rules.alert_rule_update(user=request.user, rule=rule, data=form.cleaned_data)
    messages.success(request, f"Alert rule “{rule.name}” saved.")
    return HttpResponseRedirect(reverse("alerts"))


@require_POST
def alert_rule_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    name = rule.name
    alert_rules.alert_rule_delete(user=request.user, rule=rule)
    messages.success(request, f"Alert rule “{name}” deleted.")
    return HttpResponseRedirect(reverse("alerts"))
