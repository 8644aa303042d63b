"""``/c/<conn>/journey/?q=...&stream=...``: the journey of one event, as a page.

The query string is the API's (:class:`~streams_app.views.api.journey.JourneyQuery`); the page shows the
same steps with links to each place (the entry, the dead letter, the group), what was read ("looked at
N of M entries in K keys"), what cannot be known, and Continue when a budget stopped the start's scan.
Without ``q`` it is the form the overview's box and the Journey links fill in.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.journey import BY
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.views.api.journey import journey_params, journey_run, step_url
from streams_app.views.common import connection_context, render_screen


@require_GET
def journey_page(request: HttpRequest, conn: str) -> HttpResponse:
    context = connection_context(request, conn)
    streams = request.GET.getlist("stream")
    context.update(q=request.GET.get("q", ""), streams=streams or [""], by=request.GET.get("by", "auto"),
                   by_choices=("auto", *BY))
    if not request.GET.get("q"):
        return render_screen(request, "streams_app/journey.html", context)
    try:
        params = journey_params(request)
        found = journey_run(request, conn, params)
    except InvalidArgument as exc:
        context["error"] = exc.message
        return render_screen(request, "streams_app/journey.html", context, status=400)
    coverage = found.coverage()
    others = [
        {"stream": o[0], "entry_id": o[1],
         "url": "?" + urlencode({"q": o[1], "stream": o[0].decode("utf-8", "replace")})}
        for o in found.trace.others
    ]  # fmt: skip
    context.update(
        journey=found,
        steps=[{"step": s, "url": step_url(conn, found, s)} for s in found.steps],
        coverage=coverage,
        summary=found.summary(),
        notes=found.notes(),
        others=others,
        continue_url="?" + urlencode([("q", params.q), *[("stream", s) for s in params.stream], ("by", params.by),
                                      ("cursor", coverage["next"])])  # fmt: skip
        if coverage["next"] else None,
    )
    return render_screen(request, "streams_app/journey.html", context)
