"""The console: pages, JSON API, websockets and Celery tasks over the monitored Redis Streams."""
