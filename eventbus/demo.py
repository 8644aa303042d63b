"""Demo traffic for a fresh Redis: a small shop running on the bus, until SIGTERM/SIGINT.

What it produces, so that every tool that shows the bus (its command line, a monitoring page) has
something true to show:

* ``orders``: a storefront publishes ``order.created`` (and now and then ``order.cancelled``) at
  a few per second. Groups ``billing`` (charges the card: sometimes the gateway times out, a
  retry fixes it; orders over the card limit are declined every time and end in
  ``{orders}:dlq``) and ``inventory`` (reserves stock, rarely fails).
* ``payments``: billing publishes ``payment.captured``; group ``ledger`` books it, and refuses
  the test currency ``XTS`` every time (to ``{payments}:dlq``).
* ``emails``: receipts and a newsletter; group ``mailer`` sees SMTP timeouts (retried) and
  hard bounces (dead-lettered).
* ``quotes``: a checkout service asks ``pricing`` for quotes with request/reply.
* a crashed consumer: group ``analytics`` on ``orders`` whose only consumer read entries and
  never acknowledged them, so they sit in its pending list and grow idle;
* ``{orders}:metrics`` and the other streams' metric events from the worker, and ``progress:nightly-report``, a progress stream
  that restarts every half minute (and fails one run in four).

Retries are fast here (0.2 s, 0.4 s, 0.8 s) so dead letters appear within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal

import redis

from . import keys
from .bus import Bus
from .codec import Event
from .errors import EventBusError, Reject
from .retry import RetryPolicy

log = logging.getLogger("eventbus.demo")

CUSTOMERS = ["ada", "grace", "linus", "margaret", "ken", "barbara", "dennis", "frances", "edsger", "radia"]
PRODUCTS = {
    "kbd-01": Decimal("89.00"),
    "mouse-3": Decimal("29.90"),
    "mon-27": Decimal("319.00"),
    "dock-5": Decimal("149.50"),
    "cable-c": Decimal("12.99"),
    "laptop-x": Decimal("1299.00"),
}
CARD_LIMIT = Decimal("1200.00")
STUCK_GROUP = "analytics"
STUCK_CONSUMER = "analytics-worker-1"
STUCK_LIMIT = 150


class GatewayTimeout(Exception):
    """The payment gateway did not answer: worth a retry."""


class SMTPTimeout(Exception):
    """The mail relay did not answer: worth a retry."""


def build_bus(url: str) -> Bus:
    bus = Bus.from_url(url, maxlen=10_000, dlq_maxlen=5_000, metrics_maxlen=20_000)
    fast = RetryPolicy(max_retries=3, base=0.2, cap=2.0)

    @bus.on("order.created", stream="orders", group="billing", start="$", retry=fast)
    async def charge(event: Event) -> None:
        order = event.data
        await asyncio.sleep(random.uniform(0.005, 0.04))
        if Decimal(order["total"]) > CARD_LIMIT:
            raise ValueError(f"card declined: {order['total']} {order['currency']} exceeds the limit")
        if random.random() < 0.1:
            raise GatewayTimeout("payment gateway did not answer within 2s")
        await bus.apublish(
            "payments",
            "payment.captured",
            {
                "order_id": order["order_id"],
                "amount": order["total"],
                "currency": order["currency"],
                "customer": order["customer"],
                "captured_at": datetime.now(UTC),
            },
            correlation_id=event.id,
        )

    @bus.on("order.created", stream="orders", group="inventory", start="$", retry=fast)
    async def reserve(event: Event) -> None:
        await asyncio.sleep(random.uniform(0.002, 0.01))
        if random.random() < 0.02:
            raise ConnectionError("inventory database connection reset")

    @bus.on("order.cancelled", stream="orders", group="inventory", start="$", retry=fast)
    async def release(event: Event) -> None:
        await asyncio.sleep(0.003)

    @bus.on("payment.captured", stream="payments", group="ledger", start="$", retry=fast)
    async def book(event: Event) -> None:
        payment = event.data
        if payment["currency"] == "XTS":
            raise Reject("currency XTS is reserved for testing and cannot be booked")
        await asyncio.sleep(random.uniform(0.002, 0.02))
        await bus.apublish(
            "emails",
            "email.send",
            {
                "to": f"{payment['customer']}@example.com",
                "template": "receipt",
                "order_id": payment["order_id"],
            },
        )

    @bus.on("email.send", stream="emails", group="mailer", start="$", retry=fast)
    async def send_email(event: Event) -> None:
        await asyncio.sleep(random.uniform(0.01, 0.05))
        if event.data["to"].endswith("@bounce.invalid"):
            raise ValueError(f"550 5.1.1 <{event.data['to']}>: recipient address rejected")
        if random.random() < 0.15:
            raise SMTPTimeout("timed out talking to smtp.example.com:587")

    @bus.on("price.quote", stream="quotes", group="pricing", start="$", retry=fast)
    async def quote(event: Event) -> dict[str, object]:
        await asyncio.sleep(random.uniform(0.005, 0.02))
        unit = PRODUCTS[event.data["sku"]]
        return {"sku": event.data["sku"], "qty": event.data["qty"], "total": unit * event.data["qty"]}

    return bus


def _order(n: int) -> dict[str, object]:
    everyday = [sku for sku in sorted(PRODUCTS) if PRODUCTS[sku] < CARD_LIMIT]
    skus = random.sample(everyday, k=random.randint(1, 3))
    if random.random() < 0.04:  # a laptop: over the card limit, declined on every attempt
        skus.append("laptop-x")
    lines = [
        {"sku": sku, "qty": 1 if sku == "laptop-x" else random.randint(1, 2), "price": PRODUCTS[sku]}
        for sku in skus
    ]
    total = sum((PRODUCTS[line["sku"]] * line["qty"] for line in lines), Decimal("0"))  # type: ignore[index,operator]  # the demo's order lines are JSON it wrote itself: sku a str, qty an int
    return {
        "order_id": f"ord-{n:06d}",
        "customer": random.choice(CUSTOMERS),
        "lines": lines,
        "total": total,
        "currency": "XTS" if random.random() < 0.03 else "EUR",
        "created_at": datetime.now(UTC),
    }


async def _every(seconds: float) -> None:
    await asyncio.sleep(random.uniform(seconds * 0.5, seconds * 1.5))


async def storefront(bus: Bus) -> None:
    n = random.randint(1, 9000) * 100
    while True:
        n += 1
        order = _order(n)
        await bus.apublish("orders", "order.created", order)
        if random.random() < 0.05:
            await bus.apublish(
                "orders", "order.cancelled", {"order_id": order["order_id"], "reason": "customer"}
            )
        await _every(0.35)


async def newsletter(bus: Bus) -> None:
    while True:
        to = random.choice([*CUSTOMERS, "no-such-user"])
        domain = "bounce.invalid" if to == "no-such-user" else "example.com"
        await bus.apublish("emails", "email.send", {"to": f"{to}@{domain}", "template": "newsletter-week"})
        await _every(1.0)


async def checkout(bus: Bus) -> None:
    while True:
        await _every(4.0)
        sku = random.choice(sorted(PRODUCTS))
        try:
            reply = await bus.arequest(
                "quotes", "price.quote", {"sku": sku, "qty": random.randint(1, 5)}, timeout=5
            )
            log.debug("quote: %s", reply)
        except EventBusError as exc:
            log.warning("quote failed: %s", exc)


async def crashed_consumer(bus: Bus) -> None:
    """A consumer that reads a few entries now and then and never acknowledges them."""
    client = bus.aclient
    with contextlib.suppress(redis.ResponseError):
        await client.xgroup_create("orders", STUCK_GROUP, id="$", mkstream=True)
    while True:
        summary = await client.xpending("orders", STUCK_GROUP)
        if summary["pending"] < STUCK_LIMIT:
            await client.xreadgroup(STUCK_GROUP, STUCK_CONSUMER, {"orders": ">"}, count=3)
        await _every(5.0)


async def nightly_report(bus: Bus) -> None:
    run = 0
    while True:
        run += 1
        progress = bus.aprogress("nightly-report")
        await progress.start({"run": run, "steps": 20})
        rows = 0
        failed = run % 4 == 0
        for step in range(1, 21):
            await asyncio.sleep(0.5)
            rows += random.randint(500, 2000)
            await progress.delta({"step": step, "of": 20, "rows": rows})
            if failed and step == 13:
                await progress.error("warehouse connection lost at step 13")
                break
        else:
            await progress.done({"rows": rows})
        await asyncio.sleep(10)


async def report(bus: Bus) -> None:
    client = bus.aclient
    while True:
        await asyncio.sleep(30)
        pipe = client.pipeline(transaction=False)
        for key in ("orders", "payments", "emails"):
            pipe.xlen(key)
        for key in ("orders", "payments", "emails"):
            pipe.xlen(keys.dlq_key(key))
        lengths = await pipe.execute()
        log.info(
            "demo: orders %d, payments %d, emails %d; dead letters %d/%d/%d",
            *lengths,
        )


async def supervised(name: str, service: Callable[[Bus], Awaitable[None]], bus: Bus) -> None:
    """Run a service forever: a Redis restart should pause the demo, not end it."""
    while True:
        try:
            await service(bus)
        except (redis.RedisError, OSError) as exc:
            log.warning("%s: %s; restarting in 2s", name, exc)
            await asyncio.sleep(2)


async def main(url: str) -> None:
    bus = build_bus(url)
    worker = bus.worker(concurrency=16, lease_ms=15_000)
    worker_task = asyncio.create_task(worker.run(handle_signals=True))
    await asyncio.sleep(0.5)  # let the worker create its groups ("$") before traffic starts
    services = [
        asyncio.create_task(supervised(service.__name__, service, bus))
        for service in (storefront, newsletter, checkout, crashed_consumer, nightly_report, report)
    ]
    log.info("demo traffic running on %s (Ctrl-C to stop)", url.rsplit("@", 1)[-1])
    try:
        await worker_task
    finally:
        for task in services:
            task.cancel()
        await asyncio.gather(*services, return_exceptions=True)


def run_demo(url: str) -> None:
    # Retries and dead letters are the point of the demo: keep them out of the terminal.
    logging.getLogger("eventbus.worker").setLevel(logging.CRITICAL)
    asyncio.run(main(url))
